"""The ways a workload is run: eager PyTorch (the baseline), TorchScript with no fusion,
this fuser, and the peers it is compared with (NNC, oneDNN Graph, torch.compile).

Each mode says which JIT switches it runs under, how it builds a fresh function from a
workload, which node kind marks its fusion groups, and why it cannot run on a device
(None when it can). A peer that is unavailable is shown as n/a with that reason.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from fuser.bench.jit_flags import NO_FUSION, JitFlags
from fuser.bench.workloads import Workload

EAGER = "eager"
FUSER = "fuser"


@dataclass(frozen=True)
class Mode:
    name: str
    description: str
    is_peer: bool  # a peer's wrong result is reported, but does not fail the run
    group_kind: str | None  # prefix of the node kind of its fusion groups, if scripted
    flags: Callable[[torch.device], JitFlags]
    build: Callable[[Workload], Callable[..., Any]]
    unavailable_reason: Callable[[torch.device], str | None]


def _always(device: torch.device) -> str | None:
    return None


def _no_fusion(device: torch.device) -> JitFlags:
    return NO_FUSION


def _fuser_flags(device: torch.device) -> JitFlags:
    # On CPU the fuser is deployed beside oneDNN Graph (it takes the convolutions and
    # matmuls with their post-ops, we take the rest: csrc/passes/onednn_beside.h).
    beside = device.type == "cpu" and _onednn_unavailable(device) is None
    return JitFlags(
        texpr_fuser=False, fuse_on_cpu=False, fuse_on_gpu=False, onednn=beside, fuser=True
    )


def _nnc_flags(device: torch.device) -> JitFlags:
    on_cuda = device.type == "cuda"
    return JitFlags(
        texpr_fuser=True, fuse_on_cpu=not on_cuda, fuse_on_gpu=on_cuda, onednn=False, fuser=False
    )


def _nnc_unavailable(device: torch.device) -> str | None:
    if device.type == "cpu" and not torch._C._llvm_enabled():
        return "NNC on CPU needs LLVM, which this torch build lacks"
    return None


def _onednn_flags(device: torch.device) -> JitFlags:
    return JitFlags(
        texpr_fuser=False, fuse_on_cpu=False, fuse_on_gpu=False, onednn=True, fuser=False
    )


def _onednn_unavailable(device: torch.device) -> str | None:
    if device.type != "cpu":
        return "oneDNN Graph fuses CPU tensors only"
    if not torch.backends.mkldnn.is_available():
        return "this torch build has no oneDNN"
    return None


def _compile_unavailable(device: torch.device) -> str | None:
    if device.type == "cpu" and not any(shutil.which(cc) for cc in ("g++", "c++", "clang++")):
        return "torch.compile on CPU needs a C++ compiler; none on PATH"
    if device.type == "cuda" and importlib.util.find_spec("triton") is None:
        return "torch.compile on CUDA needs triton, which is not installed"
    return None


def _eager(workload: Workload) -> Callable[..., Any]:
    # Called through the instance: a model workload's functions are modules.
    return workload.eager_function()


def _scripted(workload: Workload) -> Any:
    return workload.scripted_function()


def _compiled(workload: Workload) -> Callable[..., Any]:
    # Dynamo keys its cache on a wrapper shared by every torch.compile'd function, so
    # after 8 rows it would hit its recompile limit and silently run eager: start afresh.
    torch._dynamo.reset()
    # dynamic=False: one specialized graph per shape, as the JIT fusers get; otherwise a
    # second size would switch dynamo to symbolic shapes and time a different program.
    return torch.compile(workload.eager_function(), dynamic=False)


MODES: dict[str, Mode] = {
    m.name: m
    for m in (
        Mode(
            name=EAGER,
            description="eager PyTorch (plain Python function), the baseline",
            is_peer=False,
            group_kind=None,
            flags=_no_fusion,
            build=_eager,
            unavailable_reason=_always,
        ),
        Mode(
            name="script",
            description="TorchScript with every fuser off",
            is_peer=False,
            group_kind=None,
            flags=_no_fusion,
            build=_scripted,
            unavailable_reason=_always,
        ),
        Mode(
            name=FUSER,
            description="TorchScript with this fuser (on CPU, beside oneDNN Graph)",
            is_peer=False,
            group_kind="fuser::FusionGroup",
            flags=_fuser_flags,
            build=_scripted,
            unavailable_reason=_always,
        ),
        Mode(
            name="nnc",
            description="TorchScript with NNC (TensorExpr fuser)",
            is_peer=True,
            group_kind="prim::TensorExprGroup",
            flags=_nnc_flags,
            build=_scripted,
            unavailable_reason=_nnc_unavailable,
        ),
        Mode(
            name="onednn",
            description="TorchScript with oneDNN Graph",
            is_peer=True,
            group_kind="prim::oneDNNFusionGroup",
            flags=_onednn_flags,
            build=_scripted,
            unavailable_reason=_onednn_unavailable,
        ),
        Mode(
            name="compile",
            description="torch.compile (inductor) of the eager function",
            is_peer=True,
            group_kind=None,
            flags=_no_fusion,
            build=_compiled,
            unavailable_reason=_compile_unavailable,
        ),
    )
}
