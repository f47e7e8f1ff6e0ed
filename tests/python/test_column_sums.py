"""Leading-dims sums beside rows (fusibility.h: checkRowGroup; runtime/row_executor.h):
a sum over exactly the leading dims of a value that a row group's rows walk joins
that group (layer_norm's weight and bias gradients and a residual's bias gradient,
beside layer_norm's input gradient). On CUDA, where the rows are held in registers,
the row kernel keeps running sums of each such value per block as it walks its rows
and stores one row of partial sums per block, which one more kernel adds up
(runtime/column_partials.h); elsewhere (CPU with FUSER_COLUMN_SUMS=all, rows walked
from memory) the kernel writes the value whole and ATen's sum reads it. Every result
equals eager's: shape, dtype, strides and values."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

import fuser
from helpers import all_nodes, devices, eager_from_source, script_from_source

FUSION_GROUP = "fuser::FusionGroup"
COLUMN_SUMS = {"aten::sum", "aten::_grad_sum_to_size"}
TOLERANCE = {
    torch.float32: {"rtol": 1e-5, "atol": 1e-4},
    torch.float16: {"rtol": 5e-3, "atol": 5e-3},
    torch.bfloat16: {"rtol": 3e-2, "atol": 3e-2},
}

# bias + residual + layer_norm: its backward has layer_norm's input gradient (rows),
# its weight and bias gradients and the bias's `_grad_sum_to_size` (leading-dims sums).
RESIDUAL_LAYER_NORM = (
    "def f(x, r, bias, w, b):\n"
    "    h = x + bias + r\n"
    "    return h, torch.layer_norm(h, {row}, w, b, 1e-5)\n"
)


@pytest.fixture
def column_sums(fused) -> Iterator[None]:
    """Column sums join row groups on the CPU too, for graphs optimized in the test."""
    fuser._C._set_column_sums(True, True)
    try:
        yield
    finally:
        fuser._C._set_column_sums(True, False)


def groups_of(graph) -> list[set[str]]:
    """The node kinds of each fusion group of `graph` (autodiff's subgraphs included)."""
    out = []
    for node in all_nodes(graph):
        if node.kind() == FUSION_GROUP:
            out.append({n.kind() for n in node.g("Subgraph").nodes()})
        elif node.kind() == "prim::DifferentiableGraph":
            out.extend(groups_of(node.g("Subgraph")))
    return out


def training_step(fn, args, upstream, calls: int = 4):
    """Outputs and every input's gradient of `fn`, its last call's backward graph."""
    with torch.autograd.set_multithreading_enabled(False):
        for _ in range(calls):
            ours = [a.detach().clone().requires_grad_() for a in args]
            outs = fn(*ours)
            grads = torch.autograd.grad(outs, ours, upstream)
        return [o.detach() for o in outs] + list(grads), torch.jit.last_executed_optimized_graph()


def residual_inputs(device: str, dtype: torch.dtype, shape: tuple[int, ...]):
    g = torch.Generator().manual_seed(0)
    row = shape[-1:]

    def rand(*s: int, shift: float = 0.0) -> torch.Tensor:
        return (torch.randn(*s, generator=g) + shift).to(device, dtype)

    args = [rand(*shape), rand(*shape, shift=2.0), rand(*row), rand(*row, shift=1.0), rand(*row)]
    upstream = [rand(*shape), rand(*shape)]
    return args, upstream


def assert_like_eager(got: list[torch.Tensor], want: list[torch.Tensor], dtype, exact=None) -> None:
    """`exact`: the results in float64, which a result beyond the tolerance must be
    nearer to than eager's (eager's CPU 16-bit layer_norm backward rounds more)."""
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert (g.shape, g.dtype, g.stride()) == (w.shape, w.dtype, w.stride()), i
        try:
            torch.testing.assert_close(g, w, **TOLERANCE[dtype])
        except AssertionError:
            if exact is None:
                raise
            ours = (g.double() - exact[i]).abs().max().item()
            eagers = (w.double() - exact[i]).abs().max().item()
            assert ours <= eagers, (i, ours, eagers)


def check_residual_layer_norm(device: str, dtype: torch.dtype, shape: tuple[int, ...]):
    text = RESIDUAL_LAYER_NORM.format(row=[shape[-1]])
    args, upstream = residual_inputs(device, dtype, shape)
    want, _ = training_step(eager_from_source(text), args, upstream, calls=1)
    wide = [a.double() for a in args], [u.double() for u in upstream]
    exact, _ = training_step(eager_from_source(text), *wide, calls=1)
    fuser.reset_stats()
    got, backward = training_step(script_from_source(text), args, upstream)
    assert_like_eager(got, want, dtype, exact)
    return backward


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", [(48, 64), (2, 24, 96), (33, 37), (20, 1024)])
def test_layer_norm_gradients_sum_beside_the_input_gradient(
    column_sums, device: str, dtype: torch.dtype, shape: tuple[int, ...]
) -> None:
    """One group computes layer_norm's input gradient and the three leading-dims sums;
    rows of 37 are not whole vectors, [2, 24, 96] sums over two leading dims."""
    backward = check_residual_layer_norm(device, dtype, shape)
    stats = fuser.stats()
    assert stats["interpreted_runs"] == 0 and stats["cuda_cross_compile_failures"] == 0, stats
    assert stats["column_sum_calls"] >= 1, stats
    groups = groups_of(backward)
    joined = [g for g in groups if "fuser::layer_norm_input_grad" in g]
    assert len(joined) == 1 and joined[0] & COLUMN_SUMS, groups
    # Nothing but the row group sums: every leading-dims sum sits in it.
    assert not any(g & COLUMN_SUMS for g in groups if g is not joined[0]), groups


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_cuda_rows_held_keep_partial_sums(fused, dtype: torch.dtype) -> None:
    """Rows that fill the device, held in registers (the heuristic's variant): the
    kernel keeps partial sums (small row counts may time rows cut in slices best,
    which write the summed values whole)."""
    fuser._C._set_variant_choice(False, -1)
    try:
        check_residual_layer_norm("cuda", dtype, (4096, 1024))
    finally:
        fuser._C._set_variant_choice(True, -1)
    stats = fuser.stats()
    assert stats["column_partial_calls"] >= 1 and stats["interpreted_runs"] == 0, stats


def test_off_the_sums_keep_their_own_group(fused) -> None:
    """FUSER_COLUMN_SUMS=0 (here on CPU, where it is the default): the sums are a
    column group of their own, apart from the input gradient's row group."""
    fuser._C._set_column_sums(False, False)
    try:
        backward = check_residual_layer_norm("cpu", torch.float32, (48, 64))
    finally:
        fuser._C._set_column_sums(True, False)
    rows = [g for g in groups_of(backward) if "fuser::layer_norm_input_grad" in g]
    assert len(rows) == 1 and not rows[0] & COLUMN_SUMS, groups_of(backward)
    assert any(g & COLUMN_SUMS for g in groups_of(backward)), groups_of(backward)
    assert fuser.stats()["column_sum_calls"] == 0


# Inference: softmax rows beside sums over the leading dims, keepdim or not, of the
# softmax and of a product; the last sum's result is read again, so it stays out.
SOFTMAX_SUMS = """
def f(x, b):
    y = torch.softmax(x + b, -1)
    return y, y.sum(0), (x * y).sum([0, 1], keepdim=True)
"""
SUM_READ_AGAIN = """
def f(x, b):
    y = torch.softmax(x + b, -1)
    s = y.sum([0, 1], keepdim=True)
    return y, s * 2.0 + b
"""


def inference(fn, *args: torch.Tensor):
    """`fn`'s results once optimized (the stats count the last call) and its graph."""
    with torch.no_grad():
        for _ in range(3):
            fuser.reset_stats()
            got = fn(*args)
        return list(got), torch.jit.last_executed_optimized_graph()


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("shape", [(4, 6, 40), (3, 50, 2000)])
def test_sums_of_rows_values_join_the_rows(
    column_sums, device: str, dtype: torch.dtype, shape: tuple[int, ...]
) -> None:
    """A sum over dim 0 of a 3-D softmax keeps dim 1, not the row alone: it stays out;
    the sum over dims 0 and 1 joins. Rows of 2000 are held on CUDA in float16 only."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(*shape, generator=g).to(device, dtype)
    b = torch.randn(shape[-1], generator=g).to(device, dtype)
    want = eager_from_source(SOFTMAX_SUMS)(x, b)
    got, graph = inference(script_from_source(SOFTMAX_SUMS), x, b)
    assert_like_eager(got, list(want), dtype)
    stats = fuser.stats()
    assert stats["interpreted_runs"] == 0 and stats["column_sum_calls"] == 1, stats
    softmax = [g for g in groups_of(graph) if "aten::softmax" in g]
    assert len(softmax) == 1 and "aten::sum" in softmax[0], groups_of(graph)


@pytest.mark.parametrize("device", devices())
def test_a_sum_read_again_stays_out_of_the_rows(column_sums, device: str) -> None:
    g = torch.Generator().manual_seed(4)
    x = torch.randn(3, 7, 64, generator=g).to(device)
    b = torch.randn(64, generator=g).to(device)
    want = eager_from_source(SUM_READ_AGAIN)(x, b)
    got, graph = inference(script_from_source(SUM_READ_AGAIN), x, b)
    assert_like_eager(got, list(want), torch.float32)
    assert fuser.stats()["interpreted_runs"] == 0
    softmax = [g for g in groups_of(graph) if "aten::softmax" in g]
    assert len(softmax) == 1 and "aten::sum" not in softmax[0], groups_of(graph)


# The summed value broadcasts into the rows: profiled as [3, 7, 64], called with
# [3, 7, 1] it is one element per row, which the kernel cannot sum as columns.
SUM_OF_A_BROADCAST = """
def f(x, y):
    s = torch.softmax(x + y, -1)
    return s, (y * 2.0).sum([0, 1], keepdim=True)
"""


@pytest.mark.parametrize("device", devices())
def test_a_summed_value_of_other_sizes_runs_as_eager(column_sums, device: str) -> None:
    g = torch.Generator().manual_seed(5)
    x = torch.randn(3, 7, 64, generator=g).to(device)
    fn, eager = script_from_source(SUM_OF_A_BROADCAST), eager_from_source(SUM_OF_A_BROADCAST)
    with torch.no_grad():
        for _ in range(3):
            got = fn(x, torch.randn(3, 7, 64, generator=g).to(device))
        graph = torch.jit.last_executed_optimized_graph()
        softmax = [g for g in groups_of(graph) if "aten::softmax" in g]
        assert len(softmax) == 1 and "aten::sum" in softmax[0], groups_of(graph)
        y = torch.randn(3, 7, 1, generator=g).to(device)
        fuser.reset_stats()
        got = fn(x, y)
    assert_like_eager(list(got), list(eager(x, y)), torch.float32)
    assert fuser.stats()["interpreted_runs"] == 1, fuser.stats()


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_gradients_of_an_expanded_upstream_gradient(column_sums, device: str, layout: str) -> None:
    """`layer_norm(...).sum([0, 1])`: autodiff's backward hands the norm an upstream
    gradient expanded from [C] (strides [0, 0, 1]), and the weight gradient sums its
    product with the normalized input. Where the kernel keeps no partials (CPU), it
    writes that product whole for ATen's sum; the product once took the gradient's
    layout, one slot per column for every row, and beside a transposed input (whose
    outputs take their profiled layouts) the weight gradient came out wrong."""
    text = (
        "def f(x, w, b):\n    return (torch.layer_norm(x * 2.0, [64], w, b, 1e-5).sum([0, 1]),)\n"
    )
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, 64, generator=g) + 1.0
    if layout == "transposed":
        x = (torch.randn(3, 4, 64, generator=g) + 1.0).transpose(0, 1)
    w, b = torch.randn(64, generator=g) + 1.0, torch.randn(64, generator=g)
    args = [t.to(device) for t in (x, w, b)]
    upstream = [torch.randn(64, generator=g).to(device)]
    want, _ = training_step(eager_from_source(text), args, upstream, calls=1)
    fuser.reset_stats()
    got, backward = training_step(script_from_source(text), args, upstream)
    assert_like_eager(got, want, torch.float32)
    stats = fuser.stats()
    assert stats["interpreted_runs"] == 0 and stats["column_sum_calls"] >= 1, stats
