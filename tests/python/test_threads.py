"""One scripted function, or one frozen module, called from many threads at once, as a
server calls a deployed model: the first optimization, the first compile of each
group's kernels, the variant timing of row groups and the reuse of the last call's plan
all happen while other threads call the same graph with other shapes and layouts.
Every result must be eager's."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any

import pytest
import torch

import fuser
from helpers import devices, eager_from_source, script_from_source

SOURCE = """
def f(x, w, b):
    y = torch.nn.functional.layer_norm(x * 2.0 + b, [x.size(-1)], w, b)
    a, c = torch.chunk(torch.sigmoid(y) * x, 2, -1)
    z = torch.softmax(a - c, -1) + torch.relu(c)
    return torch.cat([z, (y * y).sum(-1, keepdim=True)], -1), x.t().contiguous() * 0.5
"""

THREADS = 8


def random_arguments(rng: random.Random, device: str) -> tuple[torch.Tensor, ...]:
    rows, width = rng.choice([(4, 16), (33, 64), (7, 130), (128, 256)])
    x = torch.randn(rows, width, device=device)
    if rng.random() < 0.3:  # the same values, laid out transposed
        x = x.t().contiguous().t()
    w = torch.rand(width, device=device) + 0.5
    b = torch.randn(width, device=device)
    return x, w, b


Draw = Callable[[random.Random, str], tuple[torch.Tensor, ...]]


def calls_from_threads(
    fn: Callable[..., Any], reference: Callable[..., Any], draw: Draw, device: str, calls: int
) -> list[str]:
    """Calls `fn` from THREADS threads at once, `calls` times each with arguments from
    `draw`; where a result differs from `reference`'s on the same arguments."""
    work = [
        [draw(random.Random(k * 1000 + i), device) for i in range(calls)] for k in range(THREADS)
    ]
    start = threading.Barrier(THREADS)
    failures: list[str] = []

    def worker(k: int) -> None:
        start.wait()
        for args in work[k]:
            try:
                got = fn(*args)
                want = reference(*args)
                for g, w in zip(got, want, strict=True):
                    assert g.stride() == w.stride(), (g.stride(), w.stride())
                    torch.testing.assert_close(g, w)
            except Exception as e:  # noqa: BLE001 - every thread's failure is reported
                failures.append(f"thread {k}, x {tuple(args[0].shape)}: {str(e)[:300]}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failures


@pytest.mark.parametrize("device", devices())
def test_a_function_called_from_many_threads_at_once(fused: None, device: str) -> None:
    fn = script_from_source(SOURCE)
    fuser.reset_stats()
    failures = calls_from_threads(fn, eager_from_source(SOURCE), random_arguments, device, 6)
    assert not failures, "\n".join(failures[:5])
    assert fuser.stats()["kernel_launches"] > 0, fuser.stats()


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(64)
        self.up = torch.nn.Linear(64, 128)
        self.down = torch.nn.Linear(128, 64)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        h = torch.nn.functional.gelu(self.up(self.norm(x)))
        return (x + self.down(h) * 0.5,)


@pytest.mark.parametrize("device", devices())
def test_a_frozen_module_called_from_many_threads_at_once(fused: None, device: str) -> None:
    module = Block().to(device).eval()
    frozen = torch.jit.freeze(torch.jit.script(module))

    def reference(x: torch.Tensor) -> tuple[torch.Tensor]:
        with torch.no_grad():
            return module(x)

    def deployed(x: torch.Tensor) -> tuple[torch.Tensor]:
        with torch.no_grad():
            return frozen(x)

    def arguments(rng: random.Random, device: str) -> tuple[torch.Tensor, ...]:
        return (torch.randn(rng.choice([1, 3, 8]), rng.choice([5, 16]), 64, device=device),)

    fuser.reset_stats()
    failures = calls_from_threads(deployed, reference, arguments, device, 6)
    assert not failures, "\n".join(failures[:5])
    assert fuser.stats()["kernel_launches"] > 0, fuser.stats()
