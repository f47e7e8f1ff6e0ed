"""fuser: a TorchScript fusion pass that compiles elementwise groups for CPU and CUDA.

import fuser
fuser.enable()          # scripted functions optimized from now on are fused
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

try:
    from fuser import _C
except ImportError as err:
    raise ImportError(
        f"fuser's C++ extension did not load ({err}); build it against this torch "
        f"({torch.__version__}) with `pip install --no-build-isolation -e .`"
    ) from err
from fuser import config
from fuser._library_dirs import register_library_dirs

__version__ = "0.1.0"
__all__ = [
    "enable",
    "disable",
    "is_enabled",
    "enabled",
    "set_arg_limit",
    "get_arg_limit",
    "stats",
    "reset_stats",
    "kernel_sources",
    "report",
]

config.warn_bad_values()
register_library_dirs()

# The other fusers' switches as they were before enable(), restored by disable().
_saved_peer_state: dict[str, Any] | None = None


def _peer_state() -> dict[str, Any]:
    return {"nnc_gpu": torch._C._jit_can_fuse_on_gpu()}


def enable() -> None:
    """Fuses scripted functions optimized from now on; turns NNC off.

    oneDNN Graph (`torch.jit.enable_onednn_fusion(True)`) stays as the user set it: on
    CPU it keeps the convolutions and matmuls with the post-ops it fuses, we fuse the
    rest. Our pass runs before it, whichever was enabled first.
    """
    global _saved_peer_state
    if config.killed() or _C.is_enabled():
        return
    _saved_peer_state = _peer_state()
    # The legacy CUDA fuser would otherwise take what our pass leaves behind.
    torch._C._jit_override_can_fuse_on_gpu(False)
    _C.enable()  # also turns NNC off, and restores it on disable


def disable() -> None:
    """Stops fusing newly optimized graphs; restores the other fusers' previous state."""
    global _saved_peer_state
    if not _C.is_enabled():
        return
    _C.disable()
    if _saved_peer_state is not None:
        torch._C._jit_override_can_fuse_on_gpu(_saved_peer_state["nnc_gpu"])
        _saved_peer_state = None


def is_enabled() -> bool:
    return bool(_C.is_enabled())


@contextlib.contextmanager
def enabled(on: bool = True) -> Iterator[None]:
    """Turns the fuser on (or off) inside the block, restoring the previous state after."""
    before = is_enabled()
    (enable if on else disable)()
    try:
        yield
    finally:
        (enable if before else disable)()


def set_arg_limit(n: int) -> None:
    """Most inputs + outputs one fusion group may have (default 128); n < 2 raises."""
    _C.set_arg_limit(int(n))


def get_arg_limit() -> int:
    return int(_C.get_arg_limit())


def stats() -> dict[str, int]:
    """Process-wide counters: groups_formed, kernels_compiled, disk_cache_hits, ..."""
    return dict(_C.stats())


def reset_stats() -> None:
    _C.reset_stats()


def kernel_sources() -> list[str]:
    """Source text of every kernel compiled or loaded in this process (with
    FUSER_CROSS_COMPILE, also the CUDA forms compiled beside CPU kernels)."""
    return list(_C.kernel_sources())


# Last, so that the report modules find the API above; the function replaces the
# attribute the submodule import set (`fuser.report(...)` is the documented call).
from fuser.report import report  # noqa: E402
