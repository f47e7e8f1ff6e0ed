"""Tensors a graph builds from sizes, numbers and constants alone are built once per
distinct sizes (passes/per_shape_values.cpp, runtime/per_shape_values_op.cpp): values
TorchScript's own, new ones when a size, a dtype or the default dtype changes, and never
where something could write them afterwards. tests/cpp/test_per_shape_values checks
which pieces of a graph are cached."""

from __future__ import annotations

import pytest
import torch

import fuser
from helpers import count_kind, devices, run_optimized, script_from_source, torchscript_alone

CACHED = "fuser::PerShapeValues"

# torchvision's Swin: the shifted-window mask from x's metadata and the window sizes.
WINDOW_MASK = """
def f(x, window: int, shift: int):
    H = x.size(1)
    W = x.size(2)
    mask = x.new_zeros((H, W))
    h_slices = ((0, -window), (-window, -shift), (-shift, None))
    w_slices = ((0, -window), (-window, -shift), (-shift, None))
    count = 0
    for h in h_slices:
        for w in w_slices:
            mask[h[0]:h[1], w[0]:w[1]] = count
            count += 1
    mask = mask.view(H // window, window, W // window, window)
    mask = mask.permute(0, 2, 1, 3).reshape((H // window) * (W // window), window * window)
    mask = mask.unsqueeze(1) - mask.unsqueeze(2)
    mask = mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)
    return x.sum(-1).view(-1, window * window).unsqueeze(1) + mask
"""


def stats_delta(before: dict[str, int]) -> int:
    return fuser.stats()["per_shape_hits"] - before["per_shape_hits"]


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_a_window_mask_is_built_once_per_size(device: str, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    reference = script_from_source(WINDOW_MASK)
    fused = script_from_source(WINDOW_MASK)
    shapes = [(1, 14, 14, 8), (1, 14, 14, 8), (1, 21, 14, 8), (1, 14, 14, 8), (1, 14, 21, 8)]
    with torch.no_grad():
        for shape in shapes:
            x = torch.randn(*shape, device=device, dtype=dtype)
            with torchscript_alone():
                want = run_optimized(reference, x, 7, 3)
            with fuser.enabled(True):
                before = fuser.stats()
                got = run_optimized(fused, x, 7, 3)
                graph = torch.jit.last_executed_optimized_graph()
                hits = stats_delta(before)
            assert got.dtype == want.dtype and got.stride() == want.stride()
            torch.testing.assert_close(got, want, rtol=0, atol=0)
            assert count_kind(graph, CACHED) == 1, graph
            assert count_kind(graph, "aten::new_zeros") == 0, graph
            assert hits >= 1  # the later calls of each size at least


# Values written afterwards by what reads data (a write by the piece itself is part of
# it), or returned (their caller may write them): built each call.
WRITTEN_AFTER = """
def f(x):
    ids = torch.arange(x.size(-1), device=x.device).to(x.dtype)
    ids.add_(x[0])
    return x * ids
"""

RETURNED = """
def f(x):
    ids = torch.arange(x.size(-1), device=x.device).to(x.dtype)
    return x * ids, ids
"""


@pytest.mark.parametrize("device", devices())
def test_values_written_afterwards_or_returned_are_built_every_call(device: str) -> None:
    x = torch.randn(3, 5, device=device)
    with torch.no_grad(), fuser.enabled(True):
        written = script_from_source(WRITTEN_AFTER)
        for _ in range(4):
            want = x * (torch.arange(5.0, device=device) + x[0])
            torch.testing.assert_close(written(x), want, rtol=0, atol=0)
        assert count_kind(torch.jit.last_executed_optimized_graph(), CACHED) == 0
        returned = script_from_source(RETURNED)
        for _ in range(4):
            product, ids = returned(x)
            torch.testing.assert_close(ids, torch.arange(5.0, device=device))
            ids.mul_(100.0)  # the caller's to write
        assert count_kind(torch.jit.last_executed_optimized_graph(), CACHED) == 0


# Position ids as transformers models make them, from a float number: a tensor of the
# default dtype, so a new default dtype means new values.
POSITIONS = """
def f(x):
    start = torch.tensor(0.5, device=x.device)
    positions = torch.arange(x.size(1), device=x.device) + start
    return x + positions.unsqueeze(0)
"""


@pytest.mark.parametrize("device", devices())
def test_the_default_dtype_and_inference_mode_are_part_of_the_key(device: str) -> None:
    fused = script_from_source(POSITIONS)
    x = torch.randn(2, 6, device=device, dtype=torch.float64)
    with fuser.enabled(True):
        run_optimized(fused, x)
        assert count_kind(torch.jit.last_executed_optimized_graph(), CACHED) == 1
        before = torch.get_default_dtype()
        try:
            torch.set_default_dtype(torch.float64)
            got64 = fused(x)
        finally:
            torch.set_default_dtype(before)
        got32 = fused(x)
        with torch.inference_mode():
            in_inference = fused(x)
        again = fused(x)
    assert got32.dtype == torch.float64 and got64.dtype == torch.float64
    positions = torch.arange(6, device=device, dtype=torch.float64) + 0.5
    torch.testing.assert_close(got64, x + positions, rtol=0, atol=0)
    torch.testing.assert_close(got32, x + positions.float().double(), rtol=0, atol=0)
    torch.testing.assert_close(in_inference, got32, rtol=0, atol=0)
    torch.testing.assert_close(again, got32, rtol=0, atol=0)
    assert not again.is_inference()


RANDOM = """
def f(x):
    noise = torch.rand(x.size(0), x.size(1), device=x.device)
    return x + noise
"""


@pytest.mark.parametrize("device", devices())
def test_random_values_are_drawn_every_call(device: str) -> None:
    fused = script_from_source(RANDOM)
    x = torch.zeros(4, 4, device=device)
    with fuser.enabled(True):
        results = [fused(x) for _ in range(4)]
        assert count_kind(torch.jit.last_executed_optimized_graph(), CACHED) == 0
    assert not torch.equal(results[-1], results[-2])


# A write by the piece to a tensor it made is part of it: cached with the write done.
WRITTEN_BY_THE_PIECE = """
def f(x):
    ids = torch.arange(x.size(-1), device=x.device).to(x.dtype)
    ids.add_(1.0)
    ids[0] = -1
    return x * ids
"""


@pytest.mark.parametrize("device", devices())
def test_writes_of_the_piece_itself_are_cached_done(device: str) -> None:
    fused = script_from_source(WRITTEN_BY_THE_PIECE)
    with torch.no_grad(), fuser.enabled(True):
        for size in (5, 5, 5, 7, 5):
            x = torch.randn(3, size, device=device)
            ids = torch.arange(1.0, size + 1, device=device)
            ids[0] = -1.0
            want = x * ids
            torch.testing.assert_close(run_optimized(fused, x), want, rtol=0, atol=0)
        assert count_kind(torch.jit.last_executed_optimized_graph(), CACHED) == 1


# Random values drawn in place into a tensor the graph made, and a tensor recording
# gradients: neither is cached.
DRAWN_IN_PLACE = """
def f(x):
    noise = torch.empty(x.size(0), x.size(1), device=x.device)
    noise.uniform_()
    weights = torch.ones(x.size(1), device=x.device).requires_grad_()
    scale = torch.tensor([2.0], device=x.device, requires_grad=True)
    return x + noise * weights * scale
"""


@pytest.mark.parametrize("device", devices())
def test_values_drawn_in_place_or_recording_gradients_are_made_every_call(device: str) -> None:
    fused = script_from_source(DRAWN_IN_PLACE)
    x = torch.zeros(4, 4, device=device)
    with fuser.enabled(True):
        results = [fused(x) for _ in range(4)]
        assert count_kind(torch.jit.last_executed_optimized_graph(), CACHED) == 0
    assert not torch.equal(results[-1], results[-2])
    assert results[-1].requires_grad
    results[-1].sum().backward()  # gradients reach fresh leaves each call


# 33.6 MB of ones: more than a node keeps (32 MiB), so made every call.
BIG = """
def f(x):
    ones = torch.ones(x.size(0), 4100, 2048, device=x.device)
    return x + ones[:, :1, :1]
"""


def test_values_larger_than_the_budget_are_made_every_call() -> None:
    fused = script_from_source(BIG)
    x = torch.randn(1, 1, 1)
    with torch.no_grad(), fuser.enabled(True):
        run_optimized(fused, x)
        assert count_kind(torch.jit.last_executed_optimized_graph(), CACHED) == 1
        before = fuser.stats()
        for _ in range(3):
            torch.testing.assert_close(fused(x), x + 1.0)
        assert stats_delta(before) == 0


# Handed to Python through an attribute, passed on by ops that may return their input
# (type_as of the same dtype, dropout in eval mode), or a list of sizes: every one may be
# written by someone else, so none is cached.
class KeepsItsZeros(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.buf = torch.zeros(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = torch.zeros(x.size(0), device=x.device)
        self.buf = z
        return x + z


PASSED_ON = """
def f(x, train: bool):
    ids = torch.arange(x.size(0), device=x.device)
    return ids.type_as(x), torch.dropout(ids.float(), 0.5, train)
"""

SIZES_LIST = """
def f(x, n: int):
    t = torch.zeros(n, 2, device=x.device)
    sizes = t.size()
    y = t + x.sum()
    sizes.append(1)
    return y.reshape(sizes)
"""


@pytest.mark.parametrize("device", devices())
def test_values_that_escape_or_pass_through_copies_are_made_every_call(device: str) -> None:
    module = torch.jit.script(KeepsItsZeros())
    x = torch.ones(3, device=device)
    with fuser.enabled(True):
        for _ in range(4):
            torch.testing.assert_close(module(x), x)
            module.buf.add_(7)  # the attribute is the caller's to write
        passed_on = script_from_source(PASSED_ON)
        ids = torch.zeros(4, dtype=torch.long, device=device)
        for _ in range(4):
            same, dropped = passed_on(ids, False)
            same.mul_(10)
            dropped.mul_(10)
        want = torch.arange(4, device=device) * 10
        torch.testing.assert_close(same, want)
        torch.testing.assert_close(dropped, want.float())
        sizes = script_from_source(SIZES_LIST)
        for _ in range(4):
            assert sizes(torch.zeros(1, device=device), 3).shape == (3, 2, 1)


# A write between the piece's nodes: it stays, so a call whose view raises leaves x as
# TorchScript leaves it (unwritten: the view comes first).
WRITE_AMONG = """
def f(x, n: int):
    a = torch.zeros(n, device=x.device).view(-1, 3)
    x.add_(1)
    b = a * 2
    return x + b.sum()
"""


@pytest.mark.parametrize("device", devices())
def test_a_piece_never_moves_across_a_write(device: str) -> None:
    fused = script_from_source(WRITE_AMONG)
    with fuser.enabled(True):
        for _ in range(3):
            fused(torch.zeros(2, device=device), 6)
        x = torch.zeros(2, device=device)
        with pytest.raises(RuntimeError, match="invalid for input of size 4"):
            fused(x, 4)
    assert x.tolist() == [0.0, 0.0]
