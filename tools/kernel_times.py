"""GPU time of the fused kernel alone, next to the time per call, for benchmark rows.

The benchmark times whole calls; for cells a call is mostly matmuls and per-call CPU
work, so a slower fused kernel hides inside it. This reads the kernels' own device
time from the profiler (kernels named fuser_kernel, NNC's fused_*, triton_*).

usage: python tools/kernel_times.py lstm_cell:large:float32,gru_cell:large:float16 \\
           [--modes fuser,nnc]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from fuser.bench import workloads
from fuser.bench.jit_flags import jit_flags
from fuser.bench.modes import MODES
from fuser.bench.timing import TimingBudget, time_calls, warm_up

KERNEL_PREFIXES = ("fuser_kernel", "fused_", "triton_")
PROFILED_CALLS = 20


def kernel_us(fn, inputs) -> float:
    """Mean device time per launch of the fused kernels over PROFILED_CALLS calls."""
    activities = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(PROFILED_CALLS):
            fn(*inputs)
        torch.cuda.synchronize()
    fused = [e for e in prof.key_averages() if e.key.startswith(KERNEL_PREFIXES)]
    launches = sum(e.count for e in fused)
    return sum(e.device_time_total for e in fused) / launches if launches else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", help="workload:size:dtype, comma-separated")
    parser.add_argument("--modes", default="fuser,nnc")
    args = parser.parse_args()
    device = torch.device("cuda")
    budget = TimingBudget(seconds=0.4, min_reps=10, max_reps=4000)
    for row in args.rows.split(","):
        name, size, dtype_name = row.split(":")
        workload = workloads.WORKLOADS[name]
        inputs = workloads.make_inputs(workload, size, getattr(torch, dtype_name), device)
        for mode_name in args.modes.split(","):
            mode = MODES[mode_name]
            with jit_flags(mode.flags(device)), torch.no_grad():
                fn = mode.build(workload)
                warm_up(fn, [inputs], 5)
                torch.cuda.synchronize()
                calls = [time_calls(fn, [inputs], device, budget).median_us for _ in range(2)]
                kernel = kernel_us(fn, inputs)
            print(
                json.dumps(
                    {
                        "row": row,
                        "mode": mode_name,
                        "call_us": round(statistics.median(calls), 1),
                        "kernel_us": round(kernel, 2),
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
