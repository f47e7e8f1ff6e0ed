"""Chains of ops that only move elements, one of them a roll, run as one gather
(passes/relayouts.cpp, runtime/relayout_op.cpp): values, shapes, strides and sharing of
memory as TorchScript's own, for every dtype, input layout and shift, with the chain's
errors and gradients kept. tests/cpp/test_relayouts checks which chains are taken."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import fuser
from helpers import count_kind, devices, run_optimized, script_from_source, torchscript_alone

RELAYOUT = "fuser::Relayout"

# torchvision's Swin: shift, split into windows; merge the windows, shift back.
PARTITION = """
def f(x, shift: List[int], ws: int):
    B, H, W, C = x.shape
    if sum(shift) > 0:
        x = torch.roll(x, shifts=(-shift[0], -shift[1]), dims=(1, 2))
    x = x.view(B, H // ws, ws, W // ws, ws, C)
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(B * (H // ws) * (W // ws), ws * ws, C)
    return x
"""

REVERSE = """
def f(x, shift: List[int], ws: int, B: int, H: int, W: int):
    C = x.shape[-1]
    x = x.view(B, H // ws, W // ws, ws, ws, C)
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(B, H, W, C)
    if sum(shift) > 0:
        x = torch.roll(x, shifts=(shift[0], shift[1]), dims=(1, 2))
    x = x[:, :H, :W, :].contiguous()
    return x
"""


def gathers() -> int:
    return fuser.stats()["relayout_gathers"]


def both(source: str, *args: Any) -> tuple[Any, Any, Any, int]:
    """TorchScript's result alone, the fused result, the fused graph and its gathers."""
    reference = script_from_source(source)
    fused = script_from_source(source)
    with torchscript_alone():
        want = run_optimized(reference, *args)
    with fuser.enabled(True):
        before = gathers()
        got = run_optimized(fused, *args)
        graph = torch.jit.last_executed_optimized_graph()
    return want, got, graph, gathers() - before


def assert_same(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.stride() == want.stride() and got.storage_offset() == want.storage_offset()
    assert torch.equal(got, want)


def sample(shape: tuple[int, ...], dtype: torch.dtype, device: str) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.rand(shape, device=device) > 0.5
    if dtype.is_complex or dtype.is_floating_point:
        return torch.randn(shape, device=device, dtype=dtype)
    return torch.randint(-100, 100, shape, device=device, dtype=dtype)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("shift", [[3, 3], [0, 0], [1, 2], [0, 5]])
def test_swin_windows_are_one_gather_each_way(device: str, shift: list[int]) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 14, 21, 16, device=device)
    with torch.no_grad():
        want, got, graph, calls = both(PARTITION, x, shift, 7)
        assert count_kind(graph, RELAYOUT) == 1 and count_kind(graph, "aten::roll") == 0
        assert_same(got, want)
        assert calls >= 1
        want_back, back, graph, calls = both(REVERSE, got, shift, 7, 2, 14, 21)
        assert count_kind(graph, RELAYOUT) == 1 and count_kind(graph, "aten::roll") == 0
        assert_same(back, want_back)
        assert calls >= 1
        assert torch.equal(back, x)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize(
    "dtype",
    [
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.float64,
        torch.int8,
        torch.bool,
        torch.complex64,
        torch.complex128,
        torch.int64,
    ],
    ids=str,
)
def test_every_dtype_moves_bit_for_bit(device: str, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    # Channels of 3 (rows of odd bytes), 8 and 16: every unit width of the gather.
    for channels in (3, 8, 16):
        x = sample((1, 14, 14, channels), dtype, device)
        with torch.no_grad():
            want, got, _, calls = both(PARTITION, x, [3, 3], 7)
        assert_same(got, want)
        assert calls >= 1


SHIFTS_ONLY = """
def f(x, s: int):
    return torch.roll(x, s, 0).roll(-1, 1).t().contiguous()
"""


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize(
    "layout", ["contiguous", "transposed", "sliced", "offset", "expanded", "channels_last"]
)
def test_inputs_of_any_layout_move_as_the_chain_moves_them(device: str, layout: str) -> None:
    torch.manual_seed(0)
    base = torch.randn(12, 10, device=device)
    x = {
        "contiguous": base,
        "transposed": base.t(),
        "sliced": base[::2, 1:],
        "offset": base[3:, 2:7],
        "expanded": base[:1].expand(9, 10),
        "channels_last": torch.randn(4, 6, 3, 5, device=device).to(
            memory_format=torch.channels_last
        )[:, :, 1, 2],
    }[layout]
    with torch.no_grad():
        for s in (1, -3, 0, 7):
            want, got, graph, calls = both(SHIFTS_ONLY, x, s)
            assert count_kind(graph, RELAYOUT) == 1
            assert_same(got, want)
            assert calls >= 1


# With no shift the chain is views only: its result is the input's memory, as TorchScript's.
VIEWS_WHEN_UNSHIFTED = """
def f(x, shift: int):
    if shift != 0:
        x = torch.roll(x, shift, 1)
    return x.view(x.size(0), -1, 2).transpose(0, 1)
"""


@pytest.mark.parametrize("device", devices())
def test_a_result_of_views_alone_shares_the_input(device: str) -> None:
    x = torch.randn(4, 6, device=device)
    with torch.no_grad():
        want, got, graph, calls = both(VIEWS_WHEN_UNSHIFTED, x, 0)
        assert count_kind(graph, RELAYOUT) == 1
        assert_same(got, want)
        assert got.data_ptr() == x.data_ptr() and calls == 0
        got.mul_(0)  # written through the view, as TorchScript's result would write x
        assert torch.equal(x, torch.zeros_like(x))
        y = torch.randn(4, 6, device=device)
        want, got, _, calls = both(VIEWS_WHEN_UNSHIFTED, y, 2)
        assert_same(got, want)
        assert got.data_ptr() != y.data_ptr() and calls >= 1


ROWS_OF_ONE = """
def f(x, s: int):
    return torch.roll(x, s, -1).reshape(-1)
"""

EMPTY = """
def f(x, s: int):
    return torch.roll(x, s, 0).permute(2, 0, 1).contiguous()
"""


@pytest.mark.parametrize("device", devices())
def test_rolls_along_the_last_dim_and_empty_tensors(device: str) -> None:
    torch.manual_seed(0)
    x = torch.randn(5, 7, device=device)
    with torch.no_grad():
        for s in (1, 3, -2):
            want, got, _, calls = both(ROWS_OF_ONE, x, s)
            assert_same(got, want)
            assert calls >= 1
        empty = torch.randn(0, 3, 4, device=device)
        want, got, graph, _ = both(EMPTY, empty, 2)
        assert count_kind(graph, RELAYOUT) == 1
        assert_same(got, want)


BAD_VIEW = """
def f(x, s: int, n: int):
    return torch.roll(x, s, 0).view(n, -1)
"""


@pytest.mark.parametrize("device", devices())
def test_the_chains_errors_are_raised(device: str) -> None:
    x = torch.randn(6, 4, device=device)
    fused = script_from_source(BAD_VIEW)
    with torch.no_grad(), fuser.enabled(True):
        assert_same(run_optimized(fused, x, 1, 3), torch.roll(x, 1, 0).view(3, -1))
        with pytest.raises(RuntimeError, match="invalid for input of size"):
            fused(x, 1, 5)
        assert_same(fused(x, 2, 2), torch.roll(x, 2, 0).view(2, -1))


TRAINED = """
def f(x, w):
    y = (x * w).roll(2, 0).view(-1, 4).t().contiguous()
    return (y * y).sum()
"""


@pytest.mark.parametrize("device", devices())
def test_gradients_flow_through_the_chain(device: str) -> None:
    torch.manual_seed(0)
    w = torch.randn(8, 4, device=device)
    fused = script_from_source(TRAINED)
    with fuser.enabled(True):
        for _ in range(4):
            x = torch.randn(8, 4, device=device, requires_grad=True)
            loss = fused(x, w)
            (grad,) = torch.autograd.grad(loss, x)
            x_ref = x.detach().clone().requires_grad_(True)
            y = (x_ref * w).roll(2, 0).view(-1, 4).t().contiguous()
            (want,) = torch.autograd.grad((y * y).sum(), x_ref)
            torch.testing.assert_close(grad, want)


LIST_WRITTEN_BETWEEN = """
def f(x):
    s = [1]
    y = torch.roll(x, s, [0])
    s[0] = 2
    return torch.roll(y, s, [0]).reshape(-1)
"""


def test_a_write_between_the_ops_keeps_them_apart() -> None:
    x = torch.arange(12.0).view(6, 2)
    with torch.no_grad():
        want, got, _, _ = both(LIST_WRITTEN_BETWEEN, x)
    assert_same(got, want)
    assert torch.equal(got, torch.roll(x, 3, 0).reshape(-1))


def test_plans_follow_sizes_and_numbers() -> None:
    torch.manual_seed(0)
    fused = script_from_source(PARTITION)
    with torch.no_grad(), fuser.enabled(True):
        for shape, shift in [
            ((1, 14, 14, 4), [3, 3]),
            ((2, 14, 7, 4), [3, 3]),
            ((1, 14, 14, 4), [2, 1]),
            ((1, 14, 14, 4), [3, 3]),
            ((1, 7, 28, 6), [0, 3]),
        ]:
            x = torch.randn(*shape)
            got = run_optimized(fused, x, shift, 7)
            with torchscript_alone():
                want = script_from_source(PARTITION)
                want = run_optimized(want, x, shift, 7)
            assert_same(got, want)


ROLLED_FLAT = """
def f(x, s: int):
    return torch.roll(x, s, 0).view(-1)
"""


def test_conjugate_and_negative_views_move_their_values() -> None:
    torch.manual_seed(0)
    conj = torch.randn(4, 2, dtype=torch.cfloat).conj()
    neg = torch._neg_view(torch.randn(4, 2))
    with torch.no_grad():
        for x in (conj, neg):
            want, got, graph, _ = both(ROLLED_FLAT, x, 1)
            assert count_kind(graph, RELAYOUT) == 1
            assert got.is_conj() == want.is_conj() and got.is_neg() == want.is_neg()
            assert torch.equal(got.resolve_conj().resolve_neg(), want.resolve_conj().resolve_neg())


def test_forward_mode_tangents_move_with_their_values() -> None:
    import torch.autograd.forward_ad as fwAD

    x, tangent = torch.arange(4.0).view(2, 2), torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    fused = script_from_source(ROLLED_FLAT)
    with fuser.enabled(True), fwAD.dual_level():
        got = run_optimized(fused, fwAD.make_dual(x, tangent), 1)
        assert count_kind(torch.jit.last_executed_optimized_graph(), RELAYOUT) == 1
        moved = fwAD.unpack_dual(got).tangent
    assert moved is not None and torch.equal(moved, torch.roll(tangent, 1, 0).view(-1))


class RolledBuffer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("b", torch.arange(8.0).view(4, 2))

    def forward(self, x: torch.Tensor, s: int) -> torch.Tensor:
        return torch.roll(self.b, s, 0).view(-1) + x


def test_a_frozen_constants_chain_runs_every_call() -> None:
    frozen = torch.jit.freeze(torch.jit.script(RolledBuffer().eval()))
    x = torch.zeros(8)
    want = torch.roll(torch.arange(8.0).view(4, 2), 1, 0).view(-1)
    with torch.no_grad(), fuser.enabled(True):
        for _ in range(5):
            assert torch.equal(frozen(x, 1), want)


COPIED = """
def f(x, s: int):
    return torch.roll(x, s, 0).t().contiguous()
"""

SLICED = """
def f(x, s: int):
    return torch.roll(x, s, 0)[1:, :2]
"""

MAYBE_ROLLED = """
def f(x, s: int):
    if s != 0:
        y = torch.roll(x, s, 0)
    else:
        y = x
    return y, x
"""


VIEWED_WHEN_UNSHIFTED = """
def f(x, s: int):
    if s != 0:
        y = torch.roll(x, s, 0)
    else:
        y = x
    return y.view(x.shape)
"""


def test_results_are_tensors_or_views_as_the_chains_are() -> None:
    x = torch.randn(4, 3)
    with torch.no_grad():
        for source, s in ((COPIED, 1), (SLICED, 1), (ROLLED_FLAT, 1), (VIEWED_WHEN_UNSHIFTED, 0)):
            want, got, graph, _ = both(source, x, s)
            assert count_kind(graph, RELAYOUT) == 1
            assert_same(got, want)
            assert got._is_view() == want._is_view() and (got is x) == (want is x)
        for source in (COPIED, SLICED):
            want, got, graph, calls = both(source, x, 1)
            assert count_kind(graph, RELAYOUT) == 1 and calls >= 1
            assert_same(got, want)
            assert got._is_view() == want._is_view()
        fused = script_from_source(MAYBE_ROLLED)
        with fuser.enabled(True):
            y, same = run_optimized(fused, x, 0)
            assert count_kind(torch.jit.last_executed_optimized_graph(), RELAYOUT) == 1
    assert y is same and same is x  # the branch that hands back its input hands back x
    w = torch.randn(3, 4, requires_grad=True)
    with torch.no_grad(), fuser.enabled(True):
        copied = run_optimized(script_from_source(COPIED), x, 2)
    copied.mul_(w)  # in grad mode: a tensor of its own, not a view made without grad
    assert copied.grad_fn is not None


CHANNELS_LAST_ROLL = """
def f(x, s: int):
    return torch.roll(x, s, 2).flatten(2)
"""

EMPTY_ROLL = """
def f(x, s: int):
    return torch.roll(x, s, 1).flatten(0, 1)
"""


@pytest.mark.parametrize("device", devices())
def test_results_are_laid_out_as_the_devices_own_ops_lay_them_out(device: str) -> None:
    # ATen's CUDA roll writes a channels-last input's result row-major; the CPU's keeps
    # it channels-last: the plan follows the device's op, as the probe runs there.
    torch.manual_seed(0)
    x = torch.randn(2, 3, 4, 5, device=device).to(memory_format=torch.channels_last)
    empty = torch.randn(0, 4, 3, device=device).transpose(1, 2)
    with torch.no_grad():
        for source, value in ((CHANNELS_LAST_ROLL, x), (EMPTY_ROLL, empty)):
            reference = script_from_source(source)
            fused = script_from_source(source)
            with torchscript_alone():
                want = run_optimized(reference, value, 1)
            with fuser.enabled(True):
                got = run_optimized(fused, value, 1)
                assert count_kind(torch.jit.last_executed_optimized_graph(), RELAYOUT) == 1
            assert got.stride() == want.stride() and torch.equal(got, want)
