"""Counting the ATen elementwise kernels a call still launches, from torch.profiler.

What counts as one elementwise kernel:
- CPU: a profiler event of an ATen op named in ELEMENTWISE_OPS (pointwise math,
  comparisons, selections, activations, and the copies clone/copy_/_to_copy) that is not
  nested inside another such op: aten::relu calls aten::clamp_min, which is the same
  kernel, counted once. One nested inside a non-elementwise op counts, as the kernel
  it is: aten::contiguous's clone, the bias copy_ inside aten::addmm (CUDA's count sees
  those kernels too).
- CUDA: a GPU kernel named like ATen's elementwise kernels (`at::native::` ...
  `vectorized_elementwise_kernel`, `unrolled_elementwise_kernel`, `elementwise_kernel`;
  copies and fills launch these too). Reductions, softmax, norms, GEMMs and index
  kernels (`index_elementwise_kernel`) have names of their own and are not counted; so
  are fused kernels: this fuser's are named `fuser_kernel` (csrc/codegen), NNC's and
  inductor's have their own names.

Work inside a fusion group launches none of these, so the count is what is left
outside groups; eager's count is the baseline.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch.autograd import DeviceType

ELEMENTWISE_OPS = frozenset(
    f"aten::{name}"
    for base in (
        "abs add sub mul div neg reciprocal exp exp2 expm1 log log1p log2 sqrt rsqrt pow "
        "sin cos tan tanh sigmoid relu relu6 leaky_relu elu selu celu gelu silu mish "
        "hardtanh hardswish hardsigmoid softplus threshold clamp clamp_min clamp_max "
        "erf erfc floor ceil round trunc sign lerp addcmul addcdiv where masked_fill "
        "eq ne lt le gt ge logical_and logical_or logical_not bitwise_not maximum minimum "
        "fill zero"
    ).split()
    for name in (base, f"{base}_")
) | frozenset(("aten::clone", "aten::copy_", "aten::_to_copy", "aten::rsub"))

# ATen's elementwise kernel templates (aten/src/ATen/native/cuda/CUDALoops.cuh,
# Loops.cuh); the look-behind leaves out index_elementwise_kernel and the like.
_CUDA_ELEMENTWISE_KERNEL = re.compile(
    r"(?<![A-Za-z0-9_])(vectorized_|unrolled_)?elementwise_kernel\b"
)


def _is_aten_elementwise_kernel(name: str) -> bool:
    return "at::native" in name and _CUDA_ELEMENTWISE_KERNEL.search(name) is not None


def _outermost_elementwise(event: Any) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if parent.name in ELEMENTWISE_OPS:
            return False
        parent = parent.cpu_parent
    return True


def count_elementwise(events: Iterable[Any], device: torch.device) -> int:
    """Elementwise kernels among profiler `events` (FunctionEvents) for `device`."""
    if device.type == "cuda":
        return sum(
            1
            for e in events
            if e.device_type == DeviceType.CUDA and _is_aten_elementwise_kernel(e.name)
        )
    return sum(
        1
        for e in events
        if e.device_type == DeviceType.CPU
        and e.name in ELEMENTWISE_OPS
        and _outermost_elementwise(e)
    )


def _caller(event: Any) -> str:
    return event.cpu_parent.name if event.cpu_parent is not None else ""


def elementwise_kernels_by_op(
    events: Iterable[Any], device: torch.device
) -> Counter[tuple[str, str]]:
    """The kernels count_elementwise counts, by (op, its caller): on CUDA each kernel is
    put to the outermost elementwise op around the op that launched it (aten::relu for
    its clamp_min's kernel), or to that op itself; the caller is the op's parent event
    ("" at the top: the function's own code). Where the count says how many kernels are
    left, this says which ops leave them."""
    by_op: Counter[tuple[str, str]] = Counter()
    for e in events:
        if e.device_type != DeviceType.CPU:
            continue
        if device.type != "cuda":
            if e.name in ELEMENTWISE_OPS and _outermost_elementwise(e):
                by_op[(e.name, _caller(e))] += 1
            continue
        launched = sum(1 for k in e.kernels if _is_aten_elementwise_kernel(k.name))
        if not launched:
            continue
        op, parent = e, e.cpu_parent
        while parent is not None:
            if parent.name in ELEMENTWISE_OPS:
                op = parent
            parent = parent.cpu_parent
        by_op[(op.name, _caller(op))] += launched
    return by_op


def elementwise_kernels_per_call(
    fn: Callable[..., Any],
    arg_sets: Sequence[tuple[Any, ...]],
    device: torch.device,
    calls: int = 2,
) -> float:
    """ATen elementwise kernels per call of `fn` (already warmed up), over `calls` calls."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        for i in range(calls):
            fn(*arg_sets[i % len(arg_sets)])
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    return count_elementwise(prof.events(), device) / calls
