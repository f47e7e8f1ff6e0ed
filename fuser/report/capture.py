"""Running a model for the report: call 1 profiles, call 2 optimizes (the pass runs and
leaves typed copies of what it fused, see csrc/passes/report_capture.h), call 3 counts
the fuser's kernel launches. For training (some input or parameter requires grad) each
call also runs backward, whose graph is optimized on its own; its copies are the
backward phase.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

import fuser
from fuser import _C

PROFILE_AND_OPTIMIZE_CALLS = 2


@dataclass
class Capture:
    graphs: dict[str, list[Any]] = field(default_factory=lambda: {"forward": [], "backward": []})
    fuser_launches: dict[str, int] = field(default_factory=dict)  # phase -> one call's launches


def as_scripted(fn_or_module: Any) -> Any:
    """A scripted form of `fn_or_module` (already scripted ones as they are)."""
    if isinstance(fn_or_module, torch.jit.ScriptModule | torch.jit.ScriptFunction):
        return fn_or_module
    return torch.jit.script(fn_or_module)


def needs_grad(fn: Any, inputs: Sequence[Any]) -> bool:
    if not torch.is_grad_enabled():
        return False
    if any(isinstance(t, torch.Tensor) and t.requires_grad for t in inputs):
        return True
    parameters = getattr(fn, "parameters", None)
    return parameters is not None and any(p.requires_grad for p in parameters())


@contextlib.contextmanager
def _profiling_executor() -> Iterator[None]:
    """The executor settings under which call 1 profiles and call 2 optimizes."""
    was_profiling = torch._C._jit_set_profiling_executor(True)
    was_optimizing = torch._C._get_graph_executor_optimize(True)
    # (torch's stub types the argument as a Size; the binding takes an int)
    runs = torch._C._jit_set_num_profiled_runs(1)  # type: ignore[arg-type]
    try:
        yield
    finally:
        torch._C._jit_set_profiling_executor(was_profiling)
        torch._C._set_graph_executor_optimize(was_optimizing)
        torch._C._jit_set_num_profiled_runs(runs)


def _backward(outputs: Any) -> bool:
    tensors = [t for t in _tensors(outputs) if t.requires_grad]
    if not tensors:
        return False
    torch.autograd.backward([t.sum() for t in tensors])
    return True


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _tensors(v)]
    return []


def run_captured(fn: Any, inputs: Sequence[Any]) -> Capture:
    """Runs scripted `fn` on `inputs` with the fuser enabled and capture on."""
    training = needs_grad(fn, inputs)
    capture = Capture()
    _C._set_report_capture(True)
    try:
        with _profiling_executor(), fuser.enabled(True):
            for _ in range(PROFILE_AND_OPTIMIZE_CALLS):
                out = fn(*inputs)
                capture.graphs["forward"] += _C._take_captured_graphs()
                if training and _backward(out):
                    capture.graphs["backward"] += _C._take_captured_graphs()
            before = fuser.stats()["kernel_launches"]
            out = fn(*inputs)
            middle = fuser.stats()["kernel_launches"]
            capture.fuser_launches["forward"] = middle - before
            capture.graphs["forward"] += _C._take_captured_graphs()
            if training and _backward(out):
                capture.fuser_launches["backward"] = fuser.stats()["kernel_launches"] - middle
                capture.graphs["backward"] += _C._take_captured_graphs()
    finally:
        _C._set_report_capture(False)
    return capture
