"""A plain copy of a benchmark row's bytes, timed as the row is: the floor a row can
reach at its own size.

The benchmark's floor is the row's bytes over the bandwidth of a copy large enough to
spill every cache. A row of a few tens of MB moves in some 15 us on an H200, where a
kernel's launch, ramp and tail are a fixed share that the large copy amortizes; this
times `dst.copy_(src)` of the same bytes (half read, half written), rotating sources as
the benchmark rotates the row's inputs, by CUDA events per call and by the copy's own
device time from the profiler.

usage: python tools/copy_floor.py softmax:large:float16,layer_norm:large:float32 \\
           [--device cuda]
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass

import torch

from fuser.bench import workloads
from fuser.bench.bandwidth import copy_bandwidth_gbps
from fuser.bench.machine import last_level_cache_bytes
from fuser.bench.models import placed
from fuser.bench.modes import EAGER, MODES
from fuser.bench.presets import COPY_BUDGET
from fuser.bench.runner import autograd_mode, build_call, workload_named
from fuser.bench.timing import (
    Args,
    Timing,
    TimingBudget,
    copies_needed,
    input_copies,
    tensor_bytes,
    time_calls,
    warm_up,
)

PROFILED_CALLS = 20
BUDGET = TimingBudget(seconds=1.0, min_reps=50, max_reps=2000)


@dataclass(frozen=True)
class CopyFloor:
    row: str
    moved: int  # bytes a call of the row moves: its inputs plus eager's outputs
    copied: int  # bytes the copy moves (read plus written)
    sources: int  # copies of the source it rotates among
    floor_us: float  # moved at the large copy's bandwidth
    copy: Timing  # the same-bytes copy per call
    device_us: float  # the copy's own device time (CUDA; nan on the CPU)


def row_bytes(name: str, size: str, dtype: torch.dtype, device: torch.device) -> int:
    """Bytes a call of the row moves: its inputs plus eager's outputs."""
    workload = placed(workload_named(name), size, device, dtype)
    inputs = workloads.make_inputs(workload, size, dtype, device)
    with autograd_mode(workload.training):
        expected = build_call(MODES[EAGER], workload, device)[0](*inputs)
    return tensor_bytes(inputs) + tensor_bytes(expected)


def copy_device_us(dst: torch.Tensor, arg_sets: list[Args]) -> float:
    """Median device time of one copy, from the profiler: a contiguous copy of one dtype
    is a device-to-device memcpy (a copy kernel where torch launches one instead)."""
    activities = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for i in range(PROFILED_CALLS):
            dst.copy_(*arg_sets[i % len(arg_sets)])
        torch.cuda.synchronize()
    times = [
        e.device_time
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA
        and (e.name.startswith("Memcpy") or "copy" in e.name)
    ]
    return statistics.median(times) if len(times) == PROFILED_CALLS else float("nan")


def copy_floor(
    row: str, device: torch.device, cache_bytes: int, large_gbps: float, budget: TimingBudget
) -> CopyFloor:
    """`row` (workload:size:dtype)'s bytes copied: half read, half written, in the row's
    element size, from rotated sources that together fill the benchmark's multiple of the
    cache (timing.copies_needed), as the row's rotated inputs do."""
    name, size, dtype_name = row.split(":")
    dtype = getattr(torch, dtype_name)
    moved = row_bytes(name, size, dtype, device)
    numel = max(1, moved // 2 // dtype.itemsize)
    source = torch.randn(numel, device=device).to(dtype)
    copies = copies_needed(tensor_bytes(source), cache_bytes)
    arg_sets = input_copies((source,), copies)
    dst = torch.empty_like(source)
    warm_up(dst.copy_, arg_sets, calls=3)
    timing = time_calls(dst.copy_, arg_sets, device, budget)
    device_us = copy_device_us(dst, arg_sets) if device.type == "cuda" else float("nan")
    return CopyFloor(
        row=row,
        moved=moved,
        copied=2 * tensor_bytes(dst),
        sources=copies,
        floor_us=moved / (large_gbps * 1e3),
        copy=timing,
        device_us=device_us,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", help="workload:size:dtype, comma-separated")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    device = torch.device(args.device)
    cache = last_level_cache_bytes(device)
    large_gbps = copy_bandwidth_gbps(device, cache, COPY_BUDGET)
    print(f"large copy: {large_gbps:.1f} GB/s; last-level cache {cache / 2**20:.0f} MiB")
    print(
        "row | bytes | large-copy floor us | same-bytes copy us (median / min) | "
        "copy device us (profiler) | same-bytes GB/s | sources"
    )
    for row in args.rows.split(","):
        f = copy_floor(row, device, cache, large_gbps, BUDGET)
        print(
            f"{f.row} | {f.moved} | {f.floor_us:.1f} | {f.copy.median_us:.1f} / "
            f"{f.copy.min_us:.1f} | {f.device_us:.1f} | {f.moved / (f.copy.median_us * 1e3):.0f} | "
            f"{f.sources}"
        )


if __name__ == "__main__":
    main()
