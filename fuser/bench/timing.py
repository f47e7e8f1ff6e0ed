"""Timing one function call honestly: the median of many calls after warm-up.

Only the call itself is inside the clock: `time.perf_counter_ns` around it on CPU, a
pair of CUDA events around it on GPU (read after one synchronize at the end). Inputs
that fit in the last-level cache are rotated among copies, so a call does not find its
operands already hot from the call before.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

Args = tuple[Any, ...]

# The working set of all copies together should be this many times the cache size.
CACHE_MULTIPLE = 4
MAX_COPIES = 256


@dataclass(frozen=True)
class TimingBudget:
    seconds: float  # wall-clock budget for the timed calls of one measurement
    min_reps: int
    max_reps: int

    def share(self, parts: int) -> TimingBudget:
        """One of `parts` equal shares (at least one call each)."""
        return TimingBudget(
            seconds=self.seconds / parts,
            min_reps=max(1, math.ceil(self.min_reps / parts)),
            max_reps=max(1, math.ceil(self.max_reps / parts)),
        )


@dataclass(frozen=True)
class Timing:
    median_us: float
    min_us: float
    reps: int


def tensor_bytes(value: Any) -> int:
    """Bytes held by the tensors in `value` (nested tuples and lists included)."""
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, list | tuple):
        return sum(tensor_bytes(v) for v in value)
    return 0


def copies_needed(bytes_per_copy: int, cache_bytes: int) -> int:
    """How many copies of the inputs to rotate among: enough that together they exceed
    CACHE_MULTIPLE times the cache, or 1 when one copy already does."""
    target = CACHE_MULTIPLE * cache_bytes
    if bytes_per_copy <= 0 or bytes_per_copy >= target:
        return 1
    return min(MAX_COPIES, math.ceil(target / bytes_per_copy))


def input_copies(inputs: Args, count: int) -> list[Args]:
    """`count` argument tuples with equal values; the first is `inputs` itself. Copies
    are leaves of their own, requiring grad where the originals do."""

    def copy(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        return t.detach().clone().requires_grad_(t.requires_grad)

    return [inputs] + [tuple(copy(t) for t in inputs) for _ in range(count - 1)]


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def warm_up(fn: Callable[..., Any], arg_sets: Sequence[Args], calls: int) -> Any:
    """Calls `fn` `calls` times, rotating inputs, and returns the last result. The
    profiling executor profiles on call 1 and optimizes on call 2, so calls >= 3 leave
    the optimized plan (and any kernel compilation) behind us."""
    result = None
    for i in range(calls):
        result = fn(*arg_sets[i % len(arg_sets)])
    return result


def host_samples(
    fn: Callable[..., Any], arg_sets: Sequence[Args], device: torch.device, budget: TimingBudget
) -> list[int]:
    """Nanoseconds of host time per call, from the call to its return. On CUDA the
    device is synchronized before each call, outside the clock, so a call never waits
    for an earlier one's kernels: what is left is the host's own cost of the call."""
    samples: list[int] = []
    deadline = time.perf_counter_ns() + int(budget.seconds * 1e9)
    while len(samples) < budget.max_reps:
        args = arg_sets[len(samples) % len(arg_sets)]
        synchronize(device)
        start = time.perf_counter_ns()
        fn(*args)
        samples.append(time.perf_counter_ns() - start)
        if len(samples) >= budget.min_reps and time.perf_counter_ns() >= deadline:
            break
    return samples


def _time_on_cuda(
    fn: Callable[..., Any], arg_sets: Sequence[Args], budget: TimingBudget, device: torch.device
) -> list[int]:
    # Reading an event pair forces a sync, so the rep count comes from a short estimate
    # first and every pair is read after the last call.
    torch.cuda.synchronize(device)
    probe_start = time.perf_counter()
    for i in range(3):
        fn(*arg_sets[i % len(arg_sets)])
    torch.cuda.synchronize(device)
    per_call = max((time.perf_counter() - probe_start) / 3, 1e-7)
    reps = max(budget.min_reps, min(budget.max_reps, int(budget.seconds / per_call)))
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(reps)
    ]
    for i, (start, end) in enumerate(events):
        args = arg_sets[i % len(arg_sets)]
        start.record()
        fn(*args)
        end.record()
    torch.cuda.synchronize(device)
    return [int(start.elapsed_time(end) * 1e6) for start, end in events]


def sample_calls(
    fn: Callable[..., Any],
    arg_sets: Sequence[Args],
    device: torch.device,
    budget: TimingBudget,
) -> list[int]:
    """Nanoseconds of each call of `fn` (already warmed up) on `arg_sets` in rotation."""
    if device.type == "cuda":
        return _time_on_cuda(fn, arg_sets, budget, device)
    return host_samples(fn, arg_sets, device, budget)


def sample_turn(
    fn: Callable[..., Any],
    arg_sets: Sequence[Args],
    device: torch.device,
    budget: TimingBudget,
    start: int,
) -> tuple[list[int], int]:
    """One mode's turn of interleaved rounds: one untimed call, then `sample_calls`.
    With a call or two a turn, the first sample would otherwise pay for the caches the
    modes before just filled (the CPU model rows timed every call so). The inputs come
    from one rotation that runs on across turns and modes (`start`: its position), so
    a turn does not begin on the copy that the turn before it, another mode's, just
    read. Returns the samples and the rotation's next position."""
    count = len(arg_sets)
    fn(*arg_sets[start % count])
    turn = [arg_sets[(start + 1 + i) % count] for i in range(count)]
    samples = sample_calls(fn, turn, device, budget)
    return samples, start + 1 + len(samples)


def summarize(samples: Sequence[int]) -> Timing:
    return Timing(
        median_us=statistics.median(samples) / 1e3, min_us=min(samples) / 1e3, reps=len(samples)
    )


def time_calls(
    fn: Callable[..., Any],
    arg_sets: Sequence[Args],
    device: torch.device,
    budget: TimingBudget,
) -> Timing:
    """Times `fn` (already warmed up) on `arg_sets` in rotation; median and min per call."""
    return summarize(sample_calls(fn, arg_sets, device, budget))
