"""CPU time of fused math functions against eager's, one function at a time.

Each row is `f(x, y) = OP(x) * y` (so that the fuser forms a group) over 2^20 floats:
eager (two ATen kernels), the fuser (one kernel), and eager's OP alone (its vectorized
kernel, the cost the fused loop's OP competes with). Modes take turns round by round;
each figure is the median over rounds of each round's median. Inputs are random
(never zeros), in each function's domain, rotated among four sets.

usage: python tools/cpu_math_times.py [--ops log,sin,...] [--rounds 6] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import textwrap

import torch

import fuser
from fuser.bench.timing import TimingBudget, time_calls, warm_up

# Each function's expression of x and the range its inputs are drawn from.
OPS: dict[str, tuple[str, float, float]] = {
    "log": ("torch.log(x)", 1e-3, 100.0),
    "log2": ("torch.log2(x)", 1e-3, 100.0),
    "log10": ("torch.log10(x)", 1e-3, 100.0),
    "log1p": ("torch.log1p(x)", -0.9, 100.0),
    "expm1": ("torch.expm1(x)", -10.0, 10.0),
    "sin": ("torch.sin(x)", -10.0, 10.0),
    "cos": ("torch.cos(x)", -10.0, 10.0),
    "tan": ("torch.tan(x)", -1.5, 1.5),
    "pow": ("torch.pow(x, 1.7)", 0.0, 10.0),
    "pow_tensor": ("torch.pow(x, y)", 0.0, 4.0),
    "softplus": ("torch.nn.functional.softplus(x)", -10.0, 10.0),
    "mish": ("torch.nn.functional.mish(x)", -10.0, 10.0),
    "elu": ("torch.nn.functional.elu(x)", -10.0, 10.0),
    "sigmoid": ("torch.sigmoid(x)", -10.0, 10.0),
    "gelu": ("torch.nn.functional.gelu(x)", -10.0, 10.0),
    "atan": ("torch.atan(x)", -10.0, 10.0),
    "asin": ("torch.asin(x)", -1.0, 1.0),
    "acos": ("torch.acos(x)", -1.0, 1.0),
    "sinh": ("torch.sinh(x)", -10.0, 10.0),
    "cosh": ("torch.cosh(x)", -10.0, 10.0),
    "atan2": ("torch.atan2(x, y)", -10.0, 10.0),
    "floor_divide": ("torch.floor_divide(x, 0.37)", -10.0, 10.0),
    "remainder": ("torch.remainder(x, 0.37)", -10.0, 10.0),
    "fmod": ("torch.fmod(x, y)", -10.0, 10.0),
}


def function_source(expression: str) -> str:
    return f"def f(x, y):\n    return ({expression}) * y\n"


def op_alone_source(expression: str) -> str:
    return f"def f(x, y):\n    return {expression}\n"


def build(source: str, scripted: bool):
    source = textwrap.dedent(source)
    if scripted:
        return torch.jit.CompilationUnit(source).f
    namespace = {"torch": torch}
    exec(source, namespace)
    return namespace["f"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--numel", type=int, default=1 << 20)
    parser.add_argument("--seconds", type=float, default=0.3, help="per mode and round")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device("cpu")
    gen = torch.Generator().manual_seed(0)
    budget = TimingBudget(seconds=args.seconds, min_reps=5, max_reps=2000)
    print(f"{'op':14} {'eager':>9} {'fuser':>9} {'ratio':>6} {'eager op':>9}   (µs a call)")
    for name in args.ops.split(","):
        expression, low, high = OPS[name]
        inputs = [
            (
                torch.rand(args.numel, generator=gen) * (high - low) + low,
                torch.rand(args.numel, generator=gen) + 0.5,
            )
            for _ in range(4)
        ]
        modes = {
            "eager": build(function_source(expression), scripted=False),
            "fuser": build(function_source(expression), scripted=True),
            "eager op": build(op_alone_source(expression), scripted=False),
        }
        groups = fuser.stats()["groups_formed"]
        with fuser.enabled(True), torch.no_grad():
            warm_up(modes["fuser"], inputs, 5)
            formed = fuser.stats()["groups_formed"] > groups
            want = modes["eager"](*inputs[0])
            torch.testing.assert_close(modes["fuser"](*inputs[0]), want, equal_nan=True)
        medians: dict[str, list[float]] = {m: [] for m in modes}
        for r in range(args.rounds):
            order = list(modes) if r % 2 == 0 else list(modes)[::-1]
            for mode in order:
                with fuser.enabled(mode == "fuser"), torch.no_grad():
                    timing = time_calls(modes[mode], inputs, device, budget)
                medians[mode].append(timing.median_us)
        m = {mode: statistics.median(v) for mode, v in medians.items()}
        note = "" if formed else "   (no group formed)"
        print(
            f"{name:14} {m['eager']:9.1f} {m['fuser']:9.1f} {m['fuser'] / m['eager']:6.2f}"
            f" {m['eager op']:9.1f}{note}",
            flush=True,
        )


if __name__ == "__main__":
    main()
