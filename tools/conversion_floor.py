"""What the H100 gives for the epilogue's read/write mix: ATen's float16 -> float32
conversion of a 4096 x 4096 tensor (reads 2 bytes, writes 4 per element, as the autocast
epilogue group does), and a float32 copy, timed with CUDA events (medians of 200).

    python tools/conversion_floor.py
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import torch


def median_us(fn: Callable[[], Any], reps: int = 200) -> float:
    for _ in range(10):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def main() -> None:
    n = 4096
    half = torch.randn(n, n, device="cuda").half()
    full = torch.empty(n, n, device="cuda")
    copy_src = torch.randn(n, n, device="cuda")
    bias = torch.randn(n, device="cuda")
    moved = half.numel() * (2 + 4)
    for name, fn, nbytes in (
        ("float16 -> float32 (to, out)", lambda: full.copy_(half), moved),
        ("float16 + bias -> float32", lambda: torch.add(half, bias, out=full), moved + 4 * n),
        ("float32 copy", lambda: full.copy_(copy_src), copy_src.numel() * 8),
    ):
        us = median_us(fn)
        print(f"{name:36s} {us:8.1f} us  {nbytes / us / 1e3:7.1f} GB/s")


if __name__ == "__main__":
    main()
