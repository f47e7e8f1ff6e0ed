"""Host time of a fusion group's launch path (guard, plan reuse, launch), per group.

A scripted function of G independent chains on tiny tensors, called back to back with
the clock stopped before the device is synchronized (few enough calls per sample that
no launch waits for a free slot in the GPU's queue): the host time per call. Every
chain reads the same two inputs and the results return as one list, so what Python
converts per call does not grow with G (a tuple result would: TorchScript builds each
element's type to convert it). Divided by G the call time is a group's cost with a
share of the call's own (Python's call, the interpreter's start); the marginal cost
of a group, the slope between calls of G and of G/4 chains, leaves that share out: the
launch path, with the wrapping and freeing of the group's result. Modes: TorchScript
without a fuser (three ATen ops per chain), NNC (CUDA), ours. Two shapes of group: flat
(`sigmoid(a + c) * b`, same-shape 1-D operands) and 4-D broadcast
(`hardsigmoid(s + c) * x`, s [N, C, 1, 1] against x [N, C, H, W], the squeeze-excite
pattern of MobileNetV3); each chain's constant c differs, so that no two chains share
an op (which common-subexpression elimination would make one node, and one group).
Chains that read one tensor are siblings the partition would merge into one group
(FUSER_SIBLING_GROUPS): that merge is off while the function is optimized here, so the
call runs G groups, the cost this measures.

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

# name: (expression of chain i over a and b; the shapes of a and b)
PATTERNS: dict[str, tuple[str, list[tuple[int, ...]]]] = {
    "flat": ("torch.sigmoid(a + {c}) * b", [(64,), (64,)]),
    "broadcast4d": ("torch.nn.functional.hardsigmoid(a + {c}) * b", [(2, 8, 1, 1), (2, 8, 4, 4)]),
}


# Every pattern is three ATen ops: three kernels per chain without fusion, one with it.
OPS_PER_PATTERN = 3


def _source(pattern: str, groups: int) -> str:
    expression, _ = PATTERNS[pattern]
    # Independent chains, each its own group (sibling merging is off where they are timed).
    body = "\n".join(f"    y{i} = {expression.format(c=float(i + 1))}" for i in range(groups))
    outs = ", ".join(f"y{i}" for i in range(groups))
    return f"def f(a, b):\n{body}\n    return [{outs}]\n"


def _inputs(pattern: str, device: torch.device) -> list[torch.Tensor]:
    _, shapes = PATTERNS[pattern]
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(*shape, generator=gen).to(device) for shape in shapes]


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


# Modes timed: TorchScript without any fuser (two ATen ops per group), NNC (CUDA only;
# TorchScript's default there) and ours.
MODES = ("unfused", "nnc", "fuser")


def _count_nodes(block: Any, kind: str) -> int:
    """Nodes of `kind` in a graph or block, nested blocks included."""
    return sum(
        (node.kind() == kind) + sum(_count_nodes(inner, kind) for inner in node.blocks())
        for node in block.nodes()
    )


def _timed_call_us(mode: str, pattern: str, groups: int, device: torch.device) -> tuple[float, int]:
    """Host microseconds per call of `groups` chains in `mode`, and the fusion groups the
    executed graph holds (ours or NNC's)."""
    args = _inputs(pattern, device)
    texpr_before = torch._C._jit_texpr_fuser_enabled()
    (fuser.enable if mode == "fuser" else fuser.disable)()
    torch._C._jit_set_texpr_fuser_enabled(mode == "nnc")
    siblings_before = fuser._C._set_elementwise_siblings(False)
    try:
        fuser.reset_stats()
        fn = torch.jit.CompilationUnit(_source(pattern, groups)).f
        for _ in range(3):
            fn(*args)  # profile, optimize, first run (compiles)
        if mode == "fuser":
            formed = int(fuser.stats()["groups_formed"])
        else:
            formed = _count_nodes(
                torch.jit.last_executed_optimized_graph(), "prim::TensorExprGroup"
            )
        launches = groups * (OPS_PER_PATTERN if mode == "unfused" else 1)
        return _per_call_us(fn, args, device, launches), formed
    finally:
        fuser._C._set_elementwise_siblings(siblings_before)
        fuser.disable()
        torch._C._jit_set_texpr_fuser_enabled(texpr_before)


def measure(pattern: str, groups: int, device: torch.device) -> dict[str, dict[str, float]]:
    """Per mode: host microseconds per call of `groups` chains ("call"), that over the
    groups ("per_group"), and the marginal cost of a group ("marginal"): the slope
    between calls of `groups` and of a quarter as many chains, which leaves out what a
    call costs whatever its groups (Python's call and the interpreter's start); and the
    fusion groups formed at `groups` chains."""
    few = max(1, groups // 4)
    results: dict[str, dict[str, float]] = {}
    with torch.no_grad():
        for mode in MODES:
            if mode == "nnc" and device.type != "cuda":
                continue  # NNC needs LLVM on CPU, which the CPU wheel lacks
            call, formed = _timed_call_us(mode, pattern, groups, device)
            few_call, _ = _timed_call_us(mode, pattern, few, device)
            results[mode] = {
                "call": call,
                "per_group": call / groups,
                "marginal": (call - few_call) / (groups - few) if groups > few else call,
                "groups": float(formed),
            }
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--groups", type=int, default=16)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    print(f"host time per call, {args.groups} chains, {device}; device synchronized off the clock")
    print("marginal: slope of the call time between calls of all and of a quarter of the chains")
    header = ("pattern", "mode", "groups", "call us", "us/group", "marginal")
    print("{:<12} {:<8} {:>6} {:>8} {:>9} {:>9}".format(*header))
    for pattern in PATTERNS:
        for mode, r in measure(pattern, args.groups, device).items():
            print(
                f"{pattern:<12} {mode:<8} {int(r['groups']):>6} {r['call']:>8.1f} "
                f"{r['per_group']:>9.2f} {r['marginal']:>9.2f}"
            )


if __name__ == "__main__":
    main()
