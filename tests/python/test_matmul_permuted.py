"""CPU matmuls whose product is permuted and made contiguous (attention's heads merged
back) write the product in that layout: fuser::matmul_permuted, no copy left."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import profile

import fuser
from helpers import count_kind, eager_from_source, run_optimized, script_from_source

PERMUTED = "fuser::matmul_permuted"

MERGE_TRANSPOSE = """
def f(att: Tensor, v: Tensor) -> Tensor:
    b, h, t, d = v.shape[0], v.shape[1], att.shape[2], v.shape[3]
    return (att @ v).transpose(1, 2).contiguous().view(b, t, h * d)
"""

MERGE_PERMUTE = """
def f(att: Tensor, v: Tensor) -> Tensor:
    return torch.matmul(att, v).permute(0, 2, 1, 3).contiguous()
"""

PRODUCT_KEPT = """
def f(att: Tensor, v: Tensor) -> Tuple[Tensor, Tensor]:
    y = att @ v
    return y.transpose(1, 2).contiguous(), y
"""

LAST_DIM_MOVED = """
def f(att: Tensor, v: Tensor) -> Tensor:
    return (att @ v).transpose(-1, -2).contiguous()
"""


def _eager(source: str):
    return eager_from_source(source.replace("Tuple[Tensor, Tensor]", "tuple").replace(": Tensor", ""))


def optimized_graph(model, *args):
    with torch.no_grad():
        out = run_optimized(model, *args)
    return out, torch.jit.last_executed_optimized_graph()


def copies_left(model, *args) -> list[str]:
    """ATen copies a call still makes (clone, copy_: contiguous's, or matmul's own)."""
    with torch.no_grad(), profile() as prof:
        model(*args)
    return [e.name for e in prof.events() if e.name in ("aten::clone", "aten::copy_")]


def check_like_eager(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.stride() == want.stride()
    tol = {"rtol": 1.6e-2, "atol": 1e-2} if want.dtype == torch.bfloat16 else {}
    torch.testing.assert_close(got, want, **tol)


@pytest.mark.parametrize("source", [MERGE_TRANSPOSE, MERGE_PERMUTE])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("batch", [1, 3])
def test_merged_heads_are_written_permuted(source: str, dtype: torch.dtype, batch: int) -> None:
    fuser.enable()
    att = torch.randn(batch, 4, 9, 9).softmax(-1).to(dtype)
    v = torch.randn(batch, 4, 9, 16).to(dtype)
    model = script_from_source(source)
    out, graph = optimized_graph(model, att, v)
    check_like_eager(out, _eager(source)(att, v))
    assert count_kind(graph, PERMUTED) == 1
    assert count_kind(graph, "aten::contiguous") == 0
    # Neither contiguous's copy nor one inside matmul (batch dims that do not merge).
    assert copies_left(model, att, v) == []


def test_without_the_fuser_torchscript_copies() -> None:
    """What the test above checks can fail: TorchScript alone makes the copy."""
    att, v = torch.randn(3, 4, 9, 9), torch.randn(3, 4, 9, 16)
    model = script_from_source(MERGE_TRANSPOSE)
    _, graph = optimized_graph(model, att, v)
    assert count_kind(graph, PERMUTED) == 0
    assert copies_left(model, att, v) != []


@pytest.mark.parametrize("source", [PRODUCT_KEPT, LAST_DIM_MOVED])
def test_observable_products_and_moved_rows_keep_the_copy(source: str) -> None:
    fuser.enable()
    att, v = torch.randn(2, 4, 9, 9), torch.randn(2, 4, 9, 16)
    model = script_from_source(source)
    out, graph = optimized_graph(model, att, v)
    want = _eager(source)(att, v)
    got_all = out if isinstance(out, tuple) else (out,)
    want_all = want if isinstance(want, tuple) else (want,)
    for got, expected in zip(got_all, want_all):
        check_like_eager(got, expected)
    assert count_kind(graph, PERMUTED) == 0


def test_broadcast_and_strided_operands_and_new_shapes_after_profiling() -> None:
    fuser.enable()
    model = script_from_source(MERGE_PERMUTE)
    eager = _eager(MERGE_PERMUTE)
    # The batch broadcast against the heads, v read transposed.
    att = torch.randn(3, 1, 7, 5)
    v = torch.randn(1, 4, 16, 5).transpose(-1, -2)
    out, graph = optimized_graph(model, att, v)
    assert count_kind(graph, PERMUTED) == 1
    check_like_eager(out, eager(att, v))
    # Later calls of other shapes run the same graph: sizes come from each call.
    with torch.no_grad():
        for a, b in [
            (torch.randn(2, 4, 1, 3), torch.randn(2, 4, 3, 8)),
            (torch.randn(2, 4, 0, 3), torch.randn(2, 4, 3, 8)),
            (torch.randn(6, 4, 2, 3), torch.randn(1, 3, 8).expand(4, 3, 8)),
        ]:
            check_like_eager(model(a, b), eager(a, b))
        # Eager's errors: inner sizes that differ, a permutation of the wrong rank.
        for a, b in [
            (torch.randn(2, 4, 5, 3), torch.randn(2, 4, 4, 8)),
            (torch.randn(5, 6, 6), torch.randn(5, 6, 2)),
        ]:
            with pytest.raises(RuntimeError) as expected:
                eager(a, b)
            with pytest.raises(RuntimeError) as got:
                model(a, b)
            assert str(expected.value).splitlines()[0] in str(got.value)


def test_gradients_and_autocast_stay_eagers() -> None:
    fuser.enable()
    att = torch.randn(2, 4, 9, 9, requires_grad=True)
    v = torch.randn(2, 4, 9, 16, requires_grad=True)
    model = script_from_source(MERGE_TRANSPOSE)
    for _ in range(3):
        out = model(att, v)
    out.sum().backward()
    want_att = att.detach().clone().requires_grad_()
    want_v = v.detach().clone().requires_grad_()
    _eager(MERGE_TRANSPOSE)(want_att, want_v).sum().backward()
    torch.testing.assert_close(att.grad, want_att.grad)
    torch.testing.assert_close(v.grad, want_v.grad)
    # Under CPU autocast the product is bfloat16, and so must ours be.
    model = script_from_source(MERGE_PERMUTE)
    a, b = torch.randn(2, 4, 9, 9), torch.randn(2, 4, 9, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad():
        got = run_optimized(model, a, b)
        want = _eager(MERGE_PERMUTE)(a, b)
    assert want.dtype == torch.bfloat16
    check_like_eager(got, want)
