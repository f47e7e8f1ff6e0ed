"""Device time of a lone sum over leading dims (a bias's gradient) against ATen's, for
the slice counts FUSER_ROW_SPLITS forces (run once per value; 0: the fuser's choice).

usage: FUSER_ROW_SPLITS=16 python tools/column_splits.py 8192x3072,8192x768 float16,float32
"""

from __future__ import annotations

import os
import statistics
import sys

import torch

import fuser

SOURCE = """
def bias_grad(g):
    return g.sum([0, 1])
"""


def device_us(fn, inputs: list[torch.Tensor], reps: int = 200) -> float:
    """Median device time per call over `inputs` in rotation (CUDA events around the
    call, queued behind a spin kernel so that the host's time to launch it is hidden)."""
    for x in inputs[:3]:
        fn(x)
    times = []
    for i in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        x = inputs[i % len(inputs)]
        torch.cuda._sleep(200_000)  # about 100 us: longer than any call's host time
        start.record()
        fn(x)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000)
    return statistics.median(times)


def main() -> None:
    shapes = [tuple(int(s) for s in text.split("x")) for text in sys.argv[1].split(",")]
    dtypes = [getattr(torch, name) for name in sys.argv[2].split(",")]
    splits = os.environ.get("FUSER_ROW_SPLITS", "0")
    for rows, cols in shapes:
        for dtype in dtypes:
            # Rotating inputs beyond the L2 cache: 4 of them.
            inputs = [
                torch.randn(32, rows // 32, cols, device="cuda", dtype=dtype) for _ in range(4)
            ]
            fn = torch.jit.CompilationUnit(SOURCE).bias_grad
            with fuser.enabled(True), torch.no_grad():
                for _ in range(3):
                    fn(inputs[0])
                fused = device_us(fn, inputs)
            torch.testing.assert_close(fn(inputs[1]), inputs[1].sum([0, 1]), rtol=2e-2, atol=2e-2)
            aten = device_us(lambda x: x.sum([0, 1]), inputs)
            floor = rows * cols * inputs[0].element_size() / 2.987e6  # us at 2987 GB/s
            print(
                f"{rows}x{cols} {str(dtype):14} splits={splits:3} fuser {fused:7.2f} us  "
                f"ATen {aten:7.2f} us  floor {floor:6.2f} us",
                flush=True,
            )


if __name__ == "__main__":
    main()
