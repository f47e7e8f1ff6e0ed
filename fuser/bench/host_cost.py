"""Host time of a fusion group's launch path (guard, plan reuse, launch), per group.

A scripted function with G independent groups on tiny tensors, called back to back
with the clock stopped before the device is synchronized (few enough calls per sample
that no launch waits for a free slot in the GPU's queue): the host time per call.
Divided by G it is the cost of one group. Two shapes of group: flat
(`sigmoid(a) * b`, same-shape 1-D operands) and 4-D broadcast (`hardsigmoid(s) * x`,
s [N, C, 1, 1] against x [N, C, H, W], the squeeze-excite pattern of MobileNetV3).

    python -m fuser.bench.host_cost [--device cuda] [--groups 16]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

import fuser

# name: (expression of group i over a{i}, b{i}; the shapes of a{i} and b{i})
PATTERNS: dict[str, tuple[str, list[tuple[int, ...]]]] = {
    "flat": ("torch.sigmoid(a{i}) * b{i}", [(64,), (64,)]),
    "broadcast4d": ("torch.nn.functional.hardsigmoid(a{i}) * b{i}", [(2, 8, 1, 1), (2, 8, 4, 4)]),
}


# Every pattern is two ATen ops: two kernels per group without fusion, one with it.
OPS_PER_PATTERN = 2


def _source(pattern: str, groups: int) -> str:
    expression, _ = PATTERNS[pattern]
    params = ", ".join(f"a{i}, b{i}" for i in range(groups))
    # Independent chains: groups merge producer into consumer only, so each is its own.
    body = "\n".join(f"    y{i} = {expression.format(i=i)}" for i in range(groups))
    outs = ", ".join(f"y{i}" for i in range(groups))
    return f"def f({params}):\n{body}\n    return ({outs},)\n"


def _inputs(pattern: str, groups: int, device: torch.device) -> list[torch.Tensor]:
    _, shapes = PATTERNS[pattern]
    gen = torch.Generator().manual_seed(0)
    tensors = []
    for _ in range(groups):
        for shape in shapes:
            tensors.append(torch.randn(*shape, generator=gen).to(device))
    return tensors


# Launches one sample may queue: fewer than the GPU's queue of pending kernels holds, so
# that no launch waits for an earlier kernel to finish. With 300 calls of 16 groups per
# sample (4800 launches) the queue filled on the H100 and each cuLaunchKernel waited
# about 4 us for a free slot: the figure was the GPU's rate of tiny kernels, not host time.
LAUNCHES_PER_SAMPLE = 256


def _per_call_us(
    fn: Callable[..., Any], args: list[torch.Tensor], device: torch.device, launches_per_call: int
) -> float:
    """Median host microseconds per call: the clock stops after the last call of a sample
    and the device is synchronized outside it."""

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    calls = max(1, LAUNCHES_PER_SAMPLE // max(1, launches_per_call))
    samples = []
    for _ in range(200):
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        samples.append((time.perf_counter() - start) / calls * 1e6)
        sync()
    return statistics.median(samples)


def measure(pattern: str, groups: int, device: torch.device) -> dict[str, float]:
    """Per-call host microseconds of the function with the fuser and without any
    fusion, and the fuser's cost per group; also the groups actually formed."""
    args = _inputs(pattern, groups, device)
    results: dict[str, float] = {}
    with torch.no_grad():
        for mode in ("script", "fuser"):
            (fuser.enable if mode == "fuser" else fuser.disable)()
            fuser.reset_stats()
            fn = torch.jit.CompilationUnit(_source(pattern, groups)).f
            for _ in range(3):
                fn(*args)  # profile, optimize, first run (compiles)
            if mode == "fuser":
                results["groups"] = float(fuser.stats()["groups_formed"])
            launches = groups * (1 if mode == "fuser" else OPS_PER_PATTERN)
            results[mode] = _per_call_us(fn, args, device, launches)
            fuser.disable()
    results["fuser_per_group"] = results["fuser"] / groups
    results["script_per_group"] = results["script"] / groups
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--groups", type=int, default=16)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    print(f"host time per call, {args.groups} groups, {device}; device synchronized off the clock")
    print(f"{'pattern':<12} {'groups':>6} {'script us':>10} {'fuser us':>9} {'us/group':>9}")
    for pattern in PATTERNS:
        r = measure(pattern, args.groups, device)
        print(
            f"{pattern:<12} {int(r['groups']):>6} {r['script']:>10.1f} {r['fuser']:>9.1f} "
            f"{r['fuser_per_group']:>9.2f}"
        )


if __name__ == "__main__":
    main()
