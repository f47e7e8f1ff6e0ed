"""The fuser's environment flags: one table, read once (by the C++ core, config.cpp).

| variable               | meaning                                                        |
| ---------------------- | -------------------------------------------------------------- |
| FUSER_ENABLE=1         | enable at `import torch` (through the torch.backends entry point) |
| FUSER_DISABLE=1        | kill switch: nothing is fused, whatever the code calls         |
| FUSER_ARG_LIMIT=N      | default argument limit of a group (inputs + outputs), N >= 2   |
| FUSER_CACHE_DIR=path   | on-disk kernel cache (default ~/.cache/fuser)                  |
| FUSER_DUMP=graph,kernels,reasons | print fused graphs / kernels / refusal reasons to stderr |
| FUSER_DUMP=interpreted | print why a call ran a group interpreted, with its graph and inputs |
| FUSER_DEVICES=cpu,cuda | devices whose tensors may be fused (default both)              |
| FUSER_SINGLETON=1      | keep groups of a single node (default: dissolved)              |
| FUSER_MIN_GROUP_SIZE=N | dissolve groups of fewer than N nodes (2; 1 if FUSER_SINGLETON=1) |
| FUSER_MAX_GROUPS=N     | keep only the first N groups of each graph (default 0: no limit) |
| FUSER_EXECUTOR=interpreter | debug: run groups through the TorchScript interpreter      |
| FUSER_DISK_CACHE=0     | do not read or write the on-disk kernel cache                  |
| FUSER_CROSS_COMPILE=sm_90 | testing: also compile each CPU kernel's CUDA form with NVRTC |
| FUSER_CROSS_COMPILE=sm_90:front | ... NVRTC's front end only (5x faster; no ptxas limits) |
| FUSER_NVRTC_PATH=file  | the libnvrtc to load (default: searched, pip packages included) |
| FUSER_SHAPE_KERNELS=N  | CUDA: kernels with constant sizes for a group's first N shapes (4) |
| FUSER_HOIST=0          | keep a loop's per-step input GEMMs (`x[t] @ w`) per step, not one |
| FUSER_POOL_FIRST=0     | max pools keep reading their monotone epilogue's result        |
| FUSER_SIBLING_GROUPS=0 | elementwise groups that read one tensor stay apart (not merged) |
| FUSER_GRADIENT_SUMS=0  | bias and layer_norm weight gradients' sums stay ATen's ops     |
| FUSER_MAX_POOL_KERNEL=0 | channels-last CUDA max pools run ATen's kernel, not ours |
| FUSER_LEAVE_TO_ONEDNN=0 | with oneDNN Graph on, take the post-ops it fuses into convs too |
| FUSER_CHANNELS_LAST=0  | frozen CUDA convnets keep row-major convolutions (not channels-last) |
| FUSER_CHANNELS_LAST=all | CPU convnets channels-last too (testing without a GPU)        |
| FUSER_COLUMN_SUMS=0    | leading-dims sums stay apart from the row groups they sum beside |
| FUSER_COLUMN_SUMS=all  | CPU row groups take them in too (testing without a GPU)        |
| FUSER_TRANSPOSE_TILES=0 | transposed inputs are read along the output's rows, not in tiles |
| FUSER_TILE_SIDE=32,64  | CUDA: tiles of that side in every dtype (0: 64 if 16-bit, else 32) |
| FUSER_TILE_GROUP=G     | CUDA: blocks take G tiles down before the next column (0: auto) |
| FUSER_TILE_MIN_BLOCKS=B | CUDA: tile kernels ask for B blocks per SM (1: no register cap) |
| FUSER_AUTOTUNE=0       | no timing of kernel variants at first run: the heuristic's variant |
| FUSER_FORCE_VARIANT=i  | always variant i of a kernel (the last if fewer; -1: chosen)   |
| FUSER_ROW_SPLITS=S     | reductions cut rows in S slices, several kernels (1: never; 0: chosen) |

A bad value never raises: it gives one warning naming the variable and the accepted
values, and the default is used.
"""

from __future__ import annotations

import warnings

from fuser import _C

_warned = False


def warn_bad_values() -> None:
    """Emits the core's complaints about FUSER_* values, once per process."""
    global _warned
    if _warned:
        return
    _warned = True
    for message in _C.config_warnings():
        warnings.warn(f"fuser: {message}", RuntimeWarning, stacklevel=3)


def killed() -> bool:
    """FUSER_DISABLE=1 is set."""
    return bool(_C.killed())


def enable_at_import() -> bool:
    """FUSER_ENABLE=1 is set."""
    return bool(_C.enable_at_import())
