"""The process-wide switches that decide which fuser optimizes a TorchScript graph.

A fuser is chosen when a graph is optimized (its second call), so a mode's switches must
be set before the first call of its fresh function and stay set while it is timed.
`jit_flags` sets them for one mode and puts every one back afterwards, even on error.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch

import fuser


@dataclass(frozen=True)
class JitFlags:
    texpr_fuser: bool  # NNC (TensorExpr fuser)
    fuse_on_cpu: bool  # lets NNC take CPU tensors
    fuse_on_gpu: bool  # lets NNC take CUDA tensors
    onednn: bool  # oneDNN Graph (LLGA)
    fuser: bool  # this project's fuser


NO_FUSION = JitFlags(
    texpr_fuser=False, fuse_on_cpu=False, fuse_on_gpu=False, onednn=False, fuser=False
)


def current_flags() -> JitFlags:
    return JitFlags(
        texpr_fuser=torch._C._jit_texpr_fuser_enabled(),
        fuse_on_cpu=torch._C._jit_can_fuse_on_cpu(),
        fuse_on_gpu=torch._C._jit_can_fuse_on_gpu(),
        onednn=torch.jit.onednn_fusion_enabled(),
        fuser=fuser.is_enabled(),
    )


def _apply(flags: JitFlags) -> None:
    # The fuser first: enable() switches the peers off and disable() restores them, so
    # the peers' own values must be written after it to be the ones in force.
    if flags.fuser:
        fuser.enable()
    else:
        fuser.disable()
    torch._C._jit_set_texpr_fuser_enabled(flags.texpr_fuser)
    torch._C._jit_override_can_fuse_on_cpu(flags.fuse_on_cpu)
    torch._C._jit_override_can_fuse_on_gpu(flags.fuse_on_gpu)
    torch.jit.enable_onednn_fusion(flags.onednn)


@contextlib.contextmanager
def jit_flags(flags: JitFlags) -> Iterator[None]:
    """Sets `flags` inside the block; restores the previous values on exit."""
    before = current_flags()
    try:
        _apply(flags)
        yield
    finally:
        _apply(before)
