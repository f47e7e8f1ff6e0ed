"""The GEMM epilogue of issue 21 under autocast, through fuser.report: its group's
bytes, the time they take at the measured copy bandwidth (the floor) and the group's
measured kernel time. Usage: python tools/autocast_epilogue_report.py [cpu|cuda]"""

from __future__ import annotations

import sys

import torch

import fuser


@torch.jit.script
def gemm_epilogue(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(torch.mm(x, w) + b) * 2.0


def main() -> None:
    device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    dtype = torch.float16 if device == "cuda" else torch.bfloat16
    n, k, h = (4096, 1024, 4096) if device == "cuda" else (512, 512, 1024)  # the bench's medium
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(n, k, generator=gen).to(device)
    w = torch.randn(k, h, generator=gen).to(device)
    b = torch.randn(h, generator=gen).to(device)
    fuser.enable()
    with torch.autocast(device, dtype=dtype):
        print(fuser.report(gemm_epilogue, x, w, b))


if __name__ == "__main__":
    main()
