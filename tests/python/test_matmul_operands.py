"""Batched CUDA matmul operands that ATen would copy (their batch dims do not merge into
one stride: attention's q, k and v) get an explicit aten::contiguous before the matmul
(passes/matmul_operands.cpp), which groups take; results are eager's, bit for bit. On
the CPU the operands are left to ATen (and oneDNN Graph). tests/cpp/test_matmul_operands
checks the decision on CUDA-typed graphs without a GPU. Also: aten::contiguous in
groups, and alias-returning ops kept out of groups where an in-place op writes their
memory."""

from __future__ import annotations

import pytest
import torch

import fuser
from helpers import (
    FUSION_GROUP,
    all_nodes,
    devices,
    eager_from_source,
    fused_kinds,
    run_optimized,
    script_from_source,
)

ATTENTION = """
def f(x):
    b, t, c = x.size()
    q, k, v = x.split(c // 3, dim=2)
    q = q.view(b, t, 4, c // 12).transpose(1, 2)
    k = k.view(b, t, 4, c // 12).transpose(1, 2)
    v = v.view(b, t, 4, c // 12).transpose(1, 2)
    return torch.softmax(q @ k.transpose(-2, -1) * 0.5, -1) @ v
"""


def copied_operands(graph: torch._C.Graph) -> int:
    """Matmul operands that an aten::contiguous (or a group ending in one) produces."""
    count = 0
    for node in all_nodes(graph):
        if node.kind() != "aten::matmul":
            continue
        for value in node.inputs():
            producer = value.node()
            kinds = {producer.kind()}
            if producer.kind() == "prim::If":  # a guarded group
                kinds = {
                    inner.kind()
                    for block in producer.blocks()
                    for group in block.nodes()
                    if group.kind() == FUSION_GROUP
                    for inner in group.g("Subgraph").nodes()
                }
            count += "aten::contiguous" in kinds
    return count


CASES = [("cpu", torch.float32)] + [
    ("cuda", dtype) for dtype in (torch.float32, torch.float16) if "cuda" in devices()
]


@pytest.mark.parametrize(("device", "dtype"), CASES, ids=str)
def test_attention_operands_are_copied_as_aten_would(device: str, dtype: torch.dtype) -> None:
    x = torch.randn(3, 16, 96, device=device, dtype=dtype)
    fn = script_from_source(ATTENTION)
    fuser.reset_stats()
    with fuser.enabled(True), torch.no_grad():
        got = run_optimized(fn, x)
    graph = torch.jit.last_executed_optimized_graph()
    # q, k transposed and v: their (batch, heads) dims do not merge.
    assert copied_operands(graph) == (3 if device == "cuda" else 0), graph
    want = eager_from_source(ATTENTION)(x)
    assert got.stride() == want.stride()
    torch.testing.assert_close(got, want)
    if device == "cuda":
        # Each copy is a group of its own (strided operands: our kernel copies); the
        # softmax group besides.
        assert fuser.stats()["kernel_launches"] >= 4 * 2, fuser.stats()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the copies are made on CUDA")
def test_the_matmul_reads_what_eager_reads() -> None:
    """The copies are ATen's own reshape copies made early: the products are equal bit
    for bit."""
    text = ATTENTION.replace(
        "torch.softmax(q @ k.transpose(-2, -1) * 0.5, -1)", "(q @ k.transpose(-2, -1))"
    )
    x = torch.randn(2, 8, 48, device="cuda")
    fn = script_from_source(text)
    with fuser.enabled(True), torch.no_grad():
        got = run_optimized(fn, x)
        assert copied_operands(fn.graph_for(x)) == 3
    assert torch.equal(got, eager_from_source(text)(x))


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize(
    "case",
    ["batch_of_one", "contiguous", "broadcast", "grad", "two_dims"],
)
def test_no_copy_where_aten_makes_none(case: str, device: str) -> None:
    """A batch of one (the heads dim alone), contiguous operands, broadcast batches
    (ATen expands them first), operands recording gradients, and plain 2-D products
    are left as they are (and every CPU product)."""
    text = ATTENTION

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, device=device)

    x = randn(1 if case == "batch_of_one" else 2, 8, 48)
    if case == "contiguous":
        text = "def f(x, y):\n    return (x * 2.0) @ y\n"
        args: tuple[torch.Tensor, ...] = (randn(2, 3, 4, 5), randn(2, 3, 5, 6))
    elif case == "broadcast":
        text = "def f(x, y):\n    return x.transpose(0, 1) @ y\n"
        args = (randn(3, 1, 4, 5), randn(2, 3, 5, 6))
    elif case == "two_dims":
        text = "def f(x, y):\n    return x.t() @ y\n"
        args = (randn(5, 4), randn(5, 6))
    else:
        args = (x.requires_grad_(case == "grad"),)
    fn = script_from_source(text)
    with fuser.enabled(True), torch.set_grad_enabled(case == "grad"):
        got = run_optimized(fn, *args)
    graph = torch.jit.last_executed_optimized_graph()
    assert copied_operands(graph) == 0, graph
    torch.testing.assert_close(got, eager_from_source(text)(*args))


@pytest.mark.parametrize("device", devices())
def test_contiguous_joins_groups(device: str) -> None:
    """contiguous() of a transposed value and of a contiguous one (eager answers self: the
    group gives a fresh tensor of the same strides) fuse with their neighbours."""
    text = (
        "def f(x):\n"
        "    y = (x * 2.0).transpose(1, 2).contiguous() + 1.0\n"
        "    z = (x + 3.0).contiguous() * 2.0\n"
        "    return y, z\n"
    )
    x = torch.randn(4, 5, 6, device=device)
    fn = script_from_source(text)
    fuser.reset_stats()
    with fuser.enabled(True):
        got = run_optimized(fn, x)
    for g, w in zip(got, eager_from_source(text)(x), strict=True):
        assert (g.shape, g.stride()) == (w.shape, w.stride())
        torch.testing.assert_close(g, w)
    kinds = fused_kinds(fn.graph_for(x))
    assert "aten::contiguous" in kinds, kinds
    assert fuser.stats()["kernel_launches"] >= 2


@pytest.mark.parametrize("device", devices())
def test_a_group_of_copies_is_ours_where_the_input_is_strided(fused: None, device: str) -> None:
    """A group that only copies strided inputs row-major (attention's q, k and v) makes
    the copies in its kernel; called on a row-major input it answers that input itself,
    as eager's `x.contiguous()` does."""
    fn = script_from_source("def f(x, y):\n    return x.contiguous(), y.contiguous()\n")
    x, y = torch.randn(6, 5, device=device).t(), torch.randn(4, 6, 7, device=device)[:, ::2]
    fuser.reset_stats()
    got = run_optimized(fn, x, y)
    groups = fuser.stats()["groups_formed"]  # one, or one per copy
    assert groups >= 1, fuser.stats()
    for g, w in zip(got, (x, y), strict=True):
        assert g.is_contiguous() and g.data_ptr() != w.data_ptr() and torch.equal(g, w)
    launches = fuser.stats()["kernel_launches"]
    fn(x, y)
    assert fuser.stats()["kernel_launches"] == launches + groups
    rows = torch.randn(5, 6, device=device), torch.randn(4, 3, 7, device=device)
    for g, w in zip(fn(*rows), rows, strict=True):
        assert g.data_ptr() == w.data_ptr()
    assert fuser.stats()["kernel_launches"] == launches + groups
    mixed = rows[0], y
    for g, w in zip(fn(*mixed), mixed, strict=True):
        assert g.is_contiguous() and torch.equal(g, w)
        assert (g.data_ptr() == w.data_ptr()) == w.is_contiguous()


@pytest.mark.parametrize("op", ["to", "contiguous"])
def test_an_alias_written_in_place_stays_out_of_groups(op: str) -> None:
    """`y = x.to(x.dtype)` and `y = x.contiguous()` are x itself: an in-place write to y
    changes x. A group would give a fresh y, so such ops stay outside while a write
    reaches their memory."""
    call = {"to": "x.to(torch.float32)", "contiguous": "x.contiguous()"}[op]
    text = (
        "def f(x):\n"
        f"    y = {call}\n"
        "    z = y * 2.0 + 1.0\n"
        "    y.add_(1.0)\n"
        "    return x.clone(), z\n"
    )
    fn = script_from_source(text)
    with fuser.enabled(True):
        run_optimized(fn, torch.randn(4, 5))
    x = torch.randn(4, 5)
    got = fn(x.clone())
    want = eager_from_source(text)(x.clone())
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g, w)
    kinds = fused_kinds(fn.graph_for(x))
    assert "aten::mul" in kinds and f"aten::{op}" not in kinds, kinds


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("head", [64, 24, 6])
@pytest.mark.parametrize("offset", [0, 1])
def test_short_rows_copy_exactly(device: str, dtype: torch.dtype, head: int, offset: int) -> None:
    """Permuted copies with rows shorter than the row path's (a head of 64 or fewer):
    on CUDA a thread moves one row vector per step where the rows are whole, aligned
    vectors (head 64 and 24 at offset 0), and elements otherwise."""
    text = (
        "def f(x, n: int, h: int):\n"
        "    b, t, c = x.size()\n"
        "    return x.view(b, t, n, h).transpose(1, 2).contiguous() * 2.0\n"
    )
    wide = torch.randn(3, 40, 4 * head + offset, device=device).to(dtype)
    x = wide[:, :, offset:]
    fn = script_from_source(text)
    fuser.reset_stats()
    with fuser.enabled(True):
        got = run_optimized(fn, x, 4, head)
    want = eager_from_source(text)(x, 4, head)
    assert got.stride() == want.stride()
    assert torch.equal(got, want)
    assert fuser.stats()["kernel_launches"] >= 2, fuser.stats()
