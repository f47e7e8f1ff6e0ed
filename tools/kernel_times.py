"""GPU time of the fused kernel alone, next to the time per call, for benchmark rows.

The benchmark times whole calls; for cells a call is mostly matmuls and per-call CPU
work, so a slower fused kernel hides inside it. This reads the kernels' own device
time from the profiler (kernels named fuser_kernel, fuser_rows, NNC's fused_*,
triton_*), and the device time per call of every kernel: a call slower than its
kernels waits on the host.

Model rows (gpt2_block:medium:float16) work too; --top N lists each mode's N kernels
of most device time per call, --sequence one call's kernels in launch order, --gemms
each GEMM call (mm, bmm, addmm, baddbmm) with its operands' shapes and strides, the
kernel it ran and its device time: two modes that run the same products with other
layouts get other cuBLAS kernels.

usage: python tools/kernel_times.py lstm_cell:large:float32,gru_cell:large:float16 \\
           [--modes fuser,nnc] [--top 8]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from fuser.bench import workloads
from fuser.bench.jit_flags import jit_flags
from fuser.bench.models import placed
from fuser.bench.modes import MODES
from fuser.bench.runner import autograd_mode, build_call, workload_named
from fuser.bench.timing import TimingBudget, time_calls, warm_up

KERNEL_PREFIXES = ("fuser_kernel", "fuser_rows", "fused_", "triton_")
PROFILED_CALLS = 20
GEMM_OPS = ("aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::_addmm_activation")
# cuBLAS, cuBLASLt, CUTLASS and cuDNN kernel names (Hopper's nvjet and sm90 kernels, the
# older gemm and xmma ones, split-K's reduction, matrix-vector and dot products, cuDNN's
# convolutions, flash and memory-efficient attention) and Triton's GEMM templates.
GEMM_NAME_PARTS = (
    "gemm",
    "nvjet",
    "cutlass",
    "xmma",
    "sm90_",
    "sm80_",
    "splitkreduce",
    "gemv",
    "dot_kernel",
    "cudnn",
    "convolve",
    "fprop",
    "dgrad",
    "wgrad",
    "fmha",
    "flash",
    "triton_tem_",
)


def kernel_class(name: str) -> str:
    """gemm (products and convolutions), fused (ours, NNC's, Triton's) or other."""
    lowered = name.lower()
    if any(part in lowered for part in GEMM_NAME_PARTS):
        return "gemm"
    return "fused" if name.startswith(KERNEL_PREFIXES) else "other"


def kernel_us(fn, inputs) -> tuple[float, float, list[tuple[str, float]]]:
    """Mean device time per launch of the fused kernels; device time per call of every
    kernel (eager's own included); and per kernel name (whole, for kernel_class) its
    device time per call, most first; over PROFILED_CALLS calls."""
    activities = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(PROFILED_CALLS):
            fn(*inputs)
        torch.cuda.synchronize()
    # Kernels hold their device time as their own; the ops that launched them, none.
    events = [e for e in prof.key_averages() if e.self_device_time_total > 0]
    fused = [e for e in events if e.key.startswith(KERNEL_PREFIXES)]
    launches = sum(e.count for e in fused)
    mean = sum(e.self_device_time_total for e in fused) / launches if launches else float("nan")
    kernels = [e for e in events if not e.key.startswith(("Memcpy", "Memset"))]
    per_call = sorted(
        ((e.key, e.self_device_time_total / PROFILED_CALLS) for e in kernels),
        key=lambda item: -item[1],
    )
    return mean, sum(us for _, us in per_call), per_call


def class_totals(per_call: list[tuple[str, float]]) -> dict[str, float]:
    """Device time per call (us) of each kernel_class, so that two modes' gap can be
    placed in products and convolutions or outside them."""
    totals = {"gemm": 0.0, "fused": 0.0, "other": 0.0}
    for name, us in per_call:
        totals[kernel_class(name)] += us
    return {k: round(v, 1) for k, v in totals.items()}


def kernel_sequence(fn, inputs, name_width: int = 60) -> list[tuple[str, float]]:
    """The kernels of one call in launch order, each with its device time (us)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn(*inputs)
        torch.cuda.synchronize()
    kernels = [
        e
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA
        and not e.name.startswith(("Memcpy", "Memset"))
    ]
    kernels.sort(key=lambda e: e.time_range.start)
    return [(e.name[:name_width], e.time_range.elapsed_us()) for e in kernels]


def gemm_calls(fn, inputs, name_width: int = 60) -> list[tuple[float, int, str]]:
    """Per distinct GEMM call (op, operand shapes and strides, kernels): its device time
    per call of fn (us), how many times a call makes it, and a description; most first."""
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
        for _ in range(PROFILED_CALLS):
            fn(*inputs)
        torch.cuda.synchronize()
    totals: dict[str, list[float]] = {}
    for event in prof.events():
        if event.name not in GEMM_OPS or not event.kernels:
            continue
        strides = getattr(event, "structured_input_strides", None)
        kernels = "; ".join(sorted({k.name[:name_width] for k in event.kernels}))
        key = f"{event.name} shapes {event.input_shapes} strides {strides} -> {kernels}"
        us = sum(k.duration for k in event.kernels)
        entry = totals.setdefault(key, [0.0, 0])
        entry[0] += us
        entry[1] += 1
    return sorted(
        ((us / PROFILED_CALLS, round(n / PROFILED_CALLS), key) for key, (us, n) in totals.items()),
        key=lambda item: -item[0],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", help="workload:size:dtype, comma-separated")
    parser.add_argument("--modes", default="fuser,nnc")
    parser.add_argument("--top", type=int, default=0, help="kernels listed per mode")
    parser.add_argument("--sequence", action="store_true", help="one call's kernels in order")
    parser.add_argument("--name-width", type=int, default=60, help="characters of kernel names")
    parser.add_argument("--gemms", action="store_true", help="each GEMM call, its layouts")
    args = parser.parse_args()
    device = torch.device("cuda")
    budget = TimingBudget(seconds=0.4, min_reps=10, max_reps=4000)
    for row in args.rows.split(","):
        name, size, dtype_name = row.split(":")
        dtype = getattr(torch, dtype_name)
        workload = placed(workload_named(name), size, device, dtype)
        inputs = workloads.make_inputs(workload, size, dtype, device)
        for mode_name in args.modes.split(","):
            mode = MODES[mode_name]
            with jit_flags(mode.flags(device)), autograd_mode(workload.training):
                fn, _ = build_call(mode, workload, device)
                warm_up(fn, [inputs], 5)
                torch.cuda.synchronize()
                calls = [time_calls(fn, [inputs], device, budget).median_us for _ in range(2)]
                kernel, device_per_call, per_call = kernel_us(fn, inputs)
            print(
                json.dumps(
                    {
                        "row": row,
                        "mode": mode_name,
                        "call_us": round(statistics.median(calls), 1),
                        "kernel_us": round(kernel, 2),
                        "device_us_per_call": round(device_per_call, 2),
                        "device_us_by_class": class_totals(per_call),
                    }
                ),
                flush=True,
            )
            for kernel_name, us in per_call[: args.top]:
                print(f"    {us:9.2f} us  {kernel_name[: args.name_width]}", flush=True)
            if args.sequence:
                with jit_flags(mode.flags(device)), autograd_mode(workload.training):
                    for kernel_name, us in kernel_sequence(fn, inputs, args.name_width):
                        print(f"    > {us:9.2f} us  {kernel_name}", flush=True)
            if args.gemms:
                with jit_flags(mode.flags(device)), autograd_mode(workload.training):
                    for us, count, what in gemm_calls(fn, inputs, args.name_width):
                        print(f"    G {us:9.2f} us  x{count}  {what}", flush=True)


if __name__ == "__main__":
    main()
