"""Saves the TorchScript models that the C++ tests load (ctest runs after this)."""

import sys
from pathlib import Path

import torch


class Chain(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (x * y + 1).relu().sigmoid()


def main() -> None:
    out_dir = Path(sys.argv[1] if len(sys.argv) > 1 else "build/cmake/test_data")
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.jit.script(Chain()).save(str(out_dir / "chain.pt"))


if __name__ == "__main__":
    main()
