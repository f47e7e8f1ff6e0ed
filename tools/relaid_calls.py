"""Calls that arrive laid out otherwise than profiled (the gradient of a transposed or
permuted activation), timed: each function is profiled on row-major inputs, then called
with the layouts named; eager beside it. Run it again under FUSER_EXECUTOR=interpreter
for the interpreted calls such groups ran before session 50.

    PYTHONPATH=. python tools/relaid_calls.py --device cuda --dtype float32

CUDA: CUDA events, medians of 200 calls after warm-up, four input sets rotated. CPU:
wall time, medians of 20.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

import fuser

ADD_LAYER_NORM = (
    "def f(t, x, w, b):\n    return t + torch.nn.functional.layer_norm(x, [256], w, b, 1e-5)\n"
)
SUM_BESIDE = "def f(x, m):\n    y = x * m + 1.0\n    return y, y.sum([0, 1, 2])\n"


def median_us(fn: Callable[..., Any], sets: list[tuple[Any, ...]], device: str) -> float:
    for args in sets * 5:
        fn(*args)
    times = []
    if device == "cpu":
        for i in range(20):
            start = time.perf_counter()
            fn(*sets[i % len(sets)])
            times.append((time.perf_counter() - start) * 1e6)
        return statistics.median(times)
    torch.cuda.synchronize()
    for i in range(200):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        fn(*sets[i % len(sets)])
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end) * 1000)
    return statistics.median(times)


def cases(device: str, dtype: torch.dtype) -> list[tuple[str, str, list, list]]:
    """(name, source, profiled inputs, the relaid input sets)."""

    def randn(*sizes: int) -> torch.Tensor:
        return torch.randn(*sizes, device=device, dtype=dtype)

    w, b = randn(256), randn(256)
    add = [(randn(32, 256, 196).transpose(1, 2), randn(32, 196, 256), w, b) for _ in range(4)]
    m = randn(32, 28, 28, 128)
    permuted = [(randn(32, 128, 28, 28).permute(0, 2, 3, 1), m) for _ in range(4)]
    return [
        (
            "t(transposed) + layer_norm(x) B32xN196xC256",
            ADD_LAYER_NORM,
            [randn(32, 196, 256), randn(32, 196, 256), w, b],
            add,
        ),
        (
            "y = x(permuted) * m + 1; y, y.sum(N,H,W) N32xH28xW28xC128",
            SUM_BESIDE,
            [randn(32, 28, 28, 128), m],
            permuted,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    a = parser.parse_args()
    dtype = getattr(torch, a.dtype)
    torch._C._jit_set_num_profiled_runs(1)
    mode = "interpreted" if os.environ.get("FUSER_EXECUTOR") == "interpreter" else "kernels"
    fuser.enable()
    for name, source, profiled, sets in cases(a.device, dtype):
        scope: dict[str, Any] = {"torch": torch}
        exec(source, scope)  # noqa: S102 - the source is this file's
        eager = scope["f"]
        scripted = torch.jit.CompilationUnit(source).f
        for _ in range(3):
            scripted(*profiled)
        fuser.reset_stats()
        with torch.no_grad():
            eager_us = median_us(eager, sets, a.device)
            fused_us = median_us(scripted, sets, a.device)
        interpreted = fuser.stats()["interpreted_runs"]
        print(
            f"{name:58s} {a.dtype:9s} eager {eager_us:9.1f} us  fused {fused_us:9.1f} us "
            f"({mode}; interpreted calls {interpreted})"
        )


if __name__ == "__main__":
    main()
