"""Which ATen elementwise kernels a mode still launches per call, by the op that launches
them and its caller: the benchmark's `elementwise` column (fuser/bench/elementwise_count.py)
broken down, for finding what a model leaves outside its groups.

usage: python tools/elementwise_left.py hf_gpt2:medium:float16,hf_llama:medium:float16 \\
           [--device cuda] [--mode fuser]
"""

from __future__ import annotations

import argparse

import torch

from fuser.bench import workloads
from fuser.bench.elementwise_count import elementwise_kernels_by_op
from fuser.bench.jit_flags import jit_flags
from fuser.bench.models import placed
from fuser.bench.modes import MODES
from fuser.bench.runner import autograd_mode, build_call, workload_named
from fuser.bench.timing import synchronize, warm_up


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", help="workload:size:dtype, comma-separated")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--mode", default="fuser")
    args = parser.parse_args()
    device = torch.device(args.device)
    mode = MODES[args.mode]
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    for row in args.rows.split(","):
        name, size, dtype_name = row.split(":")
        dtype = getattr(torch, dtype_name)
        workload = placed(workload_named(name), size, device, dtype)
        inputs = workloads.make_inputs(workload, size, dtype, device)
        with jit_flags(mode.flags(device)), autograd_mode(workload.training):
            fn, _ = build_call(mode, workload, device)
            warm_up(fn, [inputs], 3)
            synchronize(device)
            with torch.profiler.profile(activities=activities) as prof:
                fn(*inputs)
                synchronize(device)
        by_op = elementwise_kernels_by_op(prof.events(), device)
        print(f"{row} {mode.name}: {sum(by_op.values())} ATen elementwise kernels per call")
        for (op, caller), count in by_op.most_common():
            print(f"  {count:4d}  {op}  (in {caller or 'the function'})")


if __name__ == "__main__":
    main()
