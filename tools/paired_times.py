"""Two modes of one benchmark row timed in alternation, round by round.

The benchmark times its modes one after the other, so a machine whose speed drifts over
a run (a CPU's clocks, other load) can put a few percent between two modes that run
the same work. Here both modes are built and warmed up first, then each round times A
then B, then B then A the next round, each for a short budget; the output has each
round's medians, each mode's median over rounds, and the rounds each mode won.

usage: python tools/paired_times.py resnet50_autocast:medium:float32 --device cpu \\
           [--modes fuser,onednn] [--rounds 12]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("row", help="workload:size:dtype")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--modes", default="fuser,onednn", help="two modes, A,B")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=0.5, help="per mode and round")
    args = parser.parse_args()
    device = torch.device(args.device)
    name, size, dtype_name = args.row.split(":")
    dtype = getattr(torch, dtype_name)
    workload = placed(workload_named(name), size, device, dtype)
    inputs = workloads.make_inputs(workload, size, dtype, device)
    names = args.modes.split(",")
    assert len(names) == 2, "two modes"
    built = {}
    for mode_name in names:
        mode = MODES[mode_name]
        with jit_flags(mode.flags(device)), autograd_mode(workload.training):
            fn, _ = build_call(mode, workload, device)
            warm_up(fn, [inputs], 5)
        built[mode_name] = (mode, fn)
    budget = TimingBudget(seconds=args.seconds, min_reps=5, max_reps=10000)
    medians: dict[str, list[float]] = {m: [] for m in names}
    for r in range(args.rounds):
        order = names if r % 2 == 0 else names[::-1]
        for mode_name in order:
            mode, fn = built[mode_name]
            with jit_flags(mode.flags(device)), autograd_mode(workload.training):
                medians[mode_name].append(time_calls(fn, [inputs], device, budget).median_us)
        print(json.dumps({"round": r, **{m: round(medians[m][-1], 1) for m in names}}), flush=True)
    a, b = names
    wins = sum(x <= y for x, y in zip(medians[a], medians[b], strict=True))
    print(
        json.dumps(
            {
                "row": args.row,
                a: round(statistics.median(medians[a]), 1),
                b: round(statistics.median(medians[b]), 1),
                f"rounds {a} <= {b}": f"{wins}/{args.rounds}",
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
