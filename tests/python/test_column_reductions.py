"""Reductions over other dims than the trailing ones (sum, mean, amax, amin, var, std,
norm over the leading dims, or over dims around a kept one as BatchNorm's statistics
are) fuse with the elementwise ops before them: the row executor takes the kept dims
as rows and the reduced ones as a row's elements (runtime/row_executor.h). Where the
innermost dim is kept, rows are neighbours in memory (Kernel::columns): the CPU walks
blocks of them together (codegen/cpp_column_printer.cpp), CUDA gives each its own
thread; both cut the reduced dims in slices when rows are few. Values, dtypes, shapes
and strides equal eager's. Whole-shaped outputs beside such reductions (a
normalization over channels, a gradient beside its bias's sum) are stored through
eager's layout of each, in the first walk that knows their values; dropout stays out
of such groups."""

from __future__ import annotations

import os
import re

import pytest
import torch
from test_reductions import DTYPES, compare, subgraph_kinds
from test_reductions import fn_of as reductions_fn_of

import fuser
from helpers import (
    FUSION_GROUP,
    all_nodes,
    devices,
    run_optimized,
    script_from_source,
)


def fn_of(*lines: str) -> str:
    return reductions_fn_of(*lines, params="x, y")


# x and y are [40, 3, 33, 70]: each case reduces dims other than the trailing ones.
CASES = {
    "sum_leading": fn_of("return (x * y).sum(0)"),
    "sum_two_leading": fn_of("return (x * y + 1.0).sum([0, 1], keepdim=True)"),
    "mean_around_channels": fn_of("return (x - y).mean([0, 2, 3], keepdim=True)"),
    "sum_first_and_third": fn_of("return (x * 2.0 + y).sum([0, 2])"),
    # Kept dims that do not merge (0, and 2 with 3): rows of two dims, read row by row.
    "sum_middle": fn_of("return (x * y).sum(1, keepdim=True)"),
    "mean_middle_dropped": fn_of("return (x - y).mean([1])"),
    "amax_leading": fn_of("return (x * y).amax(0, keepdim=True)"),
    "amin_leading": fn_of("return (x + y).amin([0, 1])"),
    "var_leading": fn_of("return (x * y).var(0)"),
    "std_around_channels": fn_of("return (x + y).std([0, 2, 3], keepdim=True)"),
    "var_biased": fn_of("return torch.var(x - y, [0], correction=0, keepdim=True)"),
    "norm_leading": fn_of("return (x * y).norm(2, [0, 1], True)"),
    # The mean broadcast back inside the group, then a second pass over the rows.
    "centred_squares": fn_of(
        "d = x * y", "m = d.mean(0, keepdim=True)", "return ((d - m) * (d - m)).sum(0)"
    ),
    "two_results": fn_of("d = x * y", "return d.sum(0, keepdim=True), d.amax(0, keepdim=True)"),
    # Reduced values feeding an epilogue of reduced shape.
    "epilogue": fn_of("return (x * y).mean(0, keepdim=True).sqrt() + 1.0"),
    # Whole outputs: beside the sum that reads them (stored in its walk), after the
    # reductions they need (a walk of their own), both kinds with statistics.
    "whole_beside_sum": fn_of("d = x * y", "return d, d.sum(0)"),
    "whole_and_variance": fn_of("d = x - y", "return d * 2.0, d.var([0, 2], keepdim=True)"),
    "centred_channels": fn_of("return x - x.mean(1, keepdim=True) * y"),
    "layer_norm_channels": fn_of(
        "u = x.mean(1, keepdim=True)",
        "d = x - u",
        "v = (d * d).mean(1, keepdim=True)",
        "return d / torch.sqrt(v + 1e-6) * y + 0.5, u",
    ),
    "softmax_leading": fn_of(
        "e = torch.exp(x - x.amax(0, keepdim=True))", "return e / e.sum(0, keepdim=True) + y"
    ),
}


def inputs(
    device: str, dtype: torch.dtype, shape: tuple[int, ...] = (40, 3, 33, 70)
) -> list[torch.Tensor]:
    return [torch.randn(shape, device=device).to(dtype) for _ in range(2)]


def case_tolerance(dtype: torch.dtype) -> str:
    # Long float32 sums: compare's sum tolerance (eager sums in another order).
    return "sum" if dtype == torch.float32 else ""


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", sorted(CASES))
def test_reduction_over_leading_dims_fuses(case: str, dtype: torch.dtype, device: str) -> None:
    args = inputs(device, dtype)
    with fuser.enabled(True):
        fn = compare(CASES[case], *args, dtype=dtype, case=case_tolerance(dtype))
    stats = fuser.stats()
    assert stats["row_launches"] >= 2, stats
    assert stats["interpreted_runs"] == 0 and stats["cuda_cross_compile_failures"] == 0, stats
    kinds = subgraph_kinds(fn, *args)
    assert kinds & {
        "aten::sum",
        "aten::mean",
        "aten::amax",
        "aten::amin",
        "aten::var",
        "aten::std",
        "aten::norm",
    }, (case, kinds)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("splits", [3, 64], indirect=True)
def test_reduced_dims_in_slices(case: str, dtype: torch.dtype, device: str, splits: int) -> None:
    """The reduced dims cut in slices (64: more slices than some rows have elements)."""
    args = inputs(device, dtype, (50, 3, 5, 9))
    with fuser.enabled(True):
        compare(CASES[case], *args, dtype=dtype, case=case_tolerance(dtype))
    stats = fuser.stats()
    assert stats["staged_calls"] >= 1 and stats["interpreted_runs"] == 0, stats
    assert stats["cuda_cross_compile_failures"] == 0, stats


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize(
    "shape", [(1, 1), (7, 1), (1, 9), (3000, 5), (2, 2500), (5000, 1030), (130, 1, 1, 7)]
)
def test_shapes_of_every_class(device: str, shape: tuple[int, ...]) -> None:
    """Size-1 dims, more rows than a CPU block (1024) or a CUDA block, long columns."""
    x, y = inputs(device, torch.float32, shape)
    with fuser.enabled(True):
        compare(fn_of("return (x * y).sum(0)"), x, y, case="sum")
        compare(fn_of("d = x * y", "return d.var(0, keepdim=True), d.amin(0)"), x, y)
    assert fuser.stats()["interpreted_runs"] == 0


@pytest.mark.parametrize("device", devices())
def test_broadcast_and_strided_inputs(device: str) -> None:
    """A per-column input broadcast along the reduced dim, a per-row one along the kept
    dim, and a non-contiguous input (its group runs the interpreter: eager's values)."""
    x = torch.randn(300, 64, device=device)
    b = torch.randn(64, device=device)
    w = torch.randn(300, 1, device=device)
    text = "def f(x, b, w):\n    return ((x + b) * w).sum(0, keepdim=True)\n"
    with fuser.enabled(True):
        compare(text, x, b, w, case="sum")
        assert fuser.stats()["interpreted_runs"] == 0
        compare(text, x.t().contiguous().t(), b, w, case="sum")


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_permuted_inputs_whose_rows_are_neighbours_are_read_in_place(
    device: str, dtype: torch.dtype, keepdim: bool
) -> None:
    """layer_norm's weight and bias gradients over a transposed activation (ViT's
    [T, B, D] attention output read as [B, T, D]): the column kernel reads it with its
    strides (neighbouring rows still neighbours in memory) instead of running the group
    interpreted, and stores contiguous sums, as eager's reductions do whatever their
    input's layout. A permuted input whose kept dim is strided and whose reduced
    elements are runs (MLP-Mixer's bias gradient over transposed activations) is walked
    row by row in its memory's order, in place too; one whose rows are neither
    neighbours nor runs still runs interpreted."""
    t, b, d = 37, 6, 96
    x = torch.randn(t, b, d, device=device).to(dtype).transpose(0, 1)
    g = torch.randn(b, t, d, device=device).to(dtype)
    mean = x.float().mean(-1, keepdim=True).to(dtype)
    sums = f"[0, 1], keepdim={keepdim}"
    text = f"def f(g, x, m):\n    return (g * (x - m)).sum({sums}), g.sum({sums})\n"
    with fuser.enabled(True):
        compare(text, g, x, mean, dtype=dtype, case=case_tolerance(dtype))
        # Both permuted: the transposed gradient and activation.
        g_t = torch.randn(t, b, d, device=device).to(dtype).transpose(0, 1)
        compare(text, g_t, x, mean, dtype=dtype, case=case_tolerance(dtype))
    stats = fuser.stats()
    assert stats["row_launches"] >= 2 and stats["interpreted_runs"] == 0, stats
    assert stats["cuda_cross_compile_failures"] == 0, stats
    # The kernel walks a block's rows side by side (compiled by this case or, the same
    # kernel, by the other keepdim's).
    assert any("fx_side" in s for s in fuser.kernel_sources())

    # The kept dim strided, the reduced elements runs (y.t() of [64, 300], beside a
    # transposed and a row-major operand): rows walked in place.
    y = torch.randn(64, 300, device=device).to(dtype).t()
    text = "def f(y, z):\n    return (y * z).sum(0), y.sum([0], keepdim=True)\n"
    for z in (torch.randn_like(y), torch.randn(300, 64, device=device).to(dtype)):
        fuser.reset_stats()
        with fuser.enabled(True):
            compare(text, y, z, dtype=dtype, case=case_tolerance(dtype))
        stats = fuser.stats()
        assert stats["row_launches"] >= 2 and stats["interpreted_runs"] == 0, stats

    # Kept dims that stay two dims apart in memory, the reduced one strided: interpreted.
    w = torch.randn(5, 7, 9, device=device).to(dtype).permute(2, 0, 1)
    fuser.reset_stats()
    with fuser.enabled(True):
        compare(
            "def f(w):\n    return (w * 2.0).sum(1)\n", w, dtype=dtype, case=case_tolerance(dtype)
        )
    assert fuser.stats()["interpreted_runs"] >= 1


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("other", ["channels_last", "contiguous"])
def test_channels_last_inputs_reduce_over_all_but_the_channels_in_place(
    device: str, dtype: torch.dtype, other: str
) -> None:
    """Sums over N, H and W of a channels-last activation (a layer scale's or a
    BatchNorm's per-channel gradient): in memory the channels are innermost, so the
    channels are the column walk's rows, read in place, the reduced dims walked in the
    activation's memory order; beside a second input of either layout. Results are
    eager's, contiguous."""
    x = torch.randn(4, 24, 9, 7, device=device).to(dtype)
    x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randn(4, 24, 9, 7, device=device).to(dtype)
    if other == "channels_last":
        y = y.contiguous(memory_format=torch.channels_last)
    texts = [
        fn_of("return (x * y).sum([0, 2, 3], keepdim=True)"),
        fn_of("return (x - y).mean([0, 2, 3]), (x * y).amax([0, 2, 3])"),
        fn_of("return (x + y).var([0, 2, 3], keepdim=True)"),
    ]
    for text in texts:
        fuser.reset_stats()
        with fuser.enabled(True):
            compare(text, x, y, dtype=dtype, case=case_tolerance(dtype))
        stats = fuser.stats()
        assert stats["row_launches"] >= 2 and stats["interpreted_runs"] == 0, (text, stats)
        assert stats["cuda_cross_compile_failures"] == 0, stats


@pytest.mark.parametrize("device", devices())
def test_layer_scale_gradient_of_a_channels_last_activation(device: str) -> None:
    """ConvNeXt's layer scale, gamma [1, C, 1, 1] times a channels-last activation: its
    gradient, autodiff's _grad_sum_to_size over N, H and W, runs as a column kernel
    reading the activation in place; gradients are eager's."""

    class LayerScale(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gamma = torch.nn.Parameter(torch.randn(1, 24, 1, 1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x * self.gamma + 1.0)

    torch.manual_seed(0)
    module = LayerScale().to(device)
    x = torch.randn(4, 24, 9, 7, device=device).contiguous(memory_format=torch.channels_last)
    grad = torch.randn(4, 24, 9, 7, device=device).contiguous(memory_format=torch.channels_last)
    want = torch.autograd.grad(module(x), [module.gamma], grad)[0]
    with fuser.enabled(True):
        scripted = torch.jit.script(module)
        for _ in range(3):
            got = torch.autograd.grad(scripted(x), [scripted.gamma], grad)[0]
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert got.stride() == want.stride()
    stats = fuser.stats()
    assert stats["interpreted_runs"] == 0 and stats["row_launches"] >= 1, stats


@pytest.mark.parametrize("device", devices())
def test_expanded_inputs_of_the_iteration_shape_are_read_in_place(device: str) -> None:
    """Inputs expanded to the iteration shape (the gradient `out.sum().backward()` hands
    a bias: a scalar's ones of stride 0; a column or a row expanded) are read with their
    zero strides; the sums are eager's, contiguous."""
    y = torch.randn(300, 64, device=device)
    text = "def f(g, y):\n    return (g * y).sum(0), g.sum(0, keepdim=True)\n"
    expanded = {
        "scalar": torch.randn((), device=device).expand(300, 64),
        "column": torch.randn(300, 1, device=device).expand(300, 64),
        "row": torch.randn(1, 64, device=device).expand(300, 64),
    }
    for name, g in expanded.items():
        fuser.reset_stats()
        with fuser.enabled(True):
            compare(text, g, y, case="sum")
        stats = fuser.stats()
        assert stats["row_launches"] >= 2 and stats["interpreted_runs"] == 0, (name, stats)
        assert stats["cuda_cross_compile_failures"] == 0, stats


# Two inputs read in place whose rows fit different walks: the first sets the walk, the
# other is read through its strides (each row at its own offset), not interpreted.
MISFITS = {
    # Columns (x: a slice, neighbouring rows side by side) beside rows that are runs.
    "columns_beside_runs": (
        "def f(x, y):\n    return (x * y).sum(1)\n",
        lambda d, t: (
            torch.randn(3, 40, 33, device=d, dtype=t)[..., :32],
            torch.randn(3, 32, 40, device=d, dtype=t).transpose(1, 2),
        ),
    ),
    # A contiguous input beside a transposed one.
    "contiguous_beside_transposed": (
        "def f(x, y):\n    return (x + y).sum(0, keepdim=True)\n",
        lambda d, t: (
            torch.randn(2, 33, 40, device=d, dtype=t),
            torch.randn(2, 40, 33, device=d, dtype=t).transpose(1, 2),
        ),
    ),
    # Rows that are runs (x transposed) beside a slice whose rows are not.
    "runs_beside_a_slice": (
        "def f(x, y):\n    return (x * y - 1.0).sum(1, keepdim=True)\n",
        lambda d, t: (
            torch.randn(3, 32, 41, device=d, dtype=t)[..., :40].transpose(1, 2),
            torch.randn(3, 40, 33, device=d, dtype=t)[..., :32],
        ),
    ),
    # EfficientViT's attention backward: a gradient laid out transposed beside a slice
    # of rows, summed over the last dim to a denominator's shape.
    "efficientvit_denominator": (
        "def f(g, a, d):\n    return (-g * a / (d * d)).sum([0, 3], keepdim=True)\n",
        lambda d, t: (
            torch.randn(2, 4, 16, 49, device=d, dtype=t).transpose(2, 3),
            torch.randn(2, 4, 49, 17, device=d, dtype=t)[..., :16],
            torch.rand(1, 4, 49, 1, device=d, dtype=t) + 0.5,
        ),
    ),
}


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("case", sorted(MISFITS))
def test_an_input_whose_rows_fit_neither_walk_is_read_through_its_strides(
    device: str, dtype: torch.dtype, case: str
) -> None:
    text, make = MISFITS[case]
    args = make(device, dtype)  # made in the dtype: .to() would copy a slice contiguous
    fuser.reset_stats()
    with fuser.enabled(True):
        compare(text, *args, dtype=dtype, case=case_tolerance(dtype))
    stats = fuser.stats()
    assert stats["row_launches"] >= 2 and stats["interpreted_runs"] == 0, stats
    assert stats["cuda_cross_compile_failures"] == 0, stats


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_input_broadcast_along_the_rows_keeps_the_block_side_by_side(
    device: str, dtype: torch.dtype
) -> None:
    """An input broadcast along the kept dim (layer_norm's per-position mean beside its
    input and gradient: [6, 50, 1] beside [6, 50, 96], summed over the first two) holds
    one element for every row of a block: the block still walks side by side (CPU: its
    vector loop reading that element once; CUDA: vector loads of the other inputs and a
    scalar load of it) instead of each row at its own offset."""
    g, x = (torch.randn(6, 50, 96, device=device).to(dtype) for _ in range(2))
    mean = x.float().mean(-1, keepdim=True).to(dtype)
    text = "def f(g, x, m):\n    return (g * (x - m)).sum([0, 1])\n"
    before = len(fuser.kernel_sources())
    with fuser.enabled(True):
        compare(text, g, x, mean, dtype=dtype, case=case_tolerance(dtype))
    stats = fuser.stats()
    assert stats["row_launches"] >= 1 and stats["interpreted_runs"] == 0, stats
    assert stats["cuda_cross_compile_failures"] == 0, stats
    sources = [s for s in fuser.kernel_sources()[before:] if "fx_side" in s]
    assert sources
    for s in sources:
        # (A CUDA kernel that copies its rows into shared memory asks where it copies.)
        flag = "fx_copy_side" if "fx_dyn" in s else "fx_side_in"
        (side,) = re.findall(rf"const bool {flag} = true[^;]*;", s)
        # The gradient's and the input's rows lie side by side; the mean's need not.
        assert len(re.findall(r"st\d+\[0\] == 1", side)) == 2, side
        if "__global__" in s:
            assert len(set(re.findall(r"const \w+ fx_w(\d+)_0 = \*\(in\1 ", s))) == 1
        else:
            assert len(set(re.findall(r"in(\d+)\[fx_off\1\[0\] \+ fx_eo\1\]", s))) == 1


@pytest.mark.parametrize("device", devices())
def test_nan_and_inf_propagate(device: str) -> None:
    x = torch.randn(50, 40, device=device)
    x[3, 5] = float("nan")
    x[7, 6] = float("inf")
    x[9, 7] = -float("inf")
    y = torch.ones_like(x)
    with fuser.enabled(True):
        for case in ["amax_leading", "sum_leading", "var_leading", "amin_leading"]:
            compare(CASES[case], x, y)
    assert fuser.stats()["interpreted_runs"] == 0


@pytest.mark.parametrize("device", devices())
def test_integer_sums(device: str) -> None:
    x = torch.randint(-5, 5, (300, 33), device=device)
    with fuser.enabled(True):
        compare("def f(x):\n    return (x * 3).sum(0)\n", x)
    assert fuser.stats()["row_launches"] >= 2


@pytest.mark.parametrize("device", devices())
def test_column_sums_are_as_accurate_as_eager(device: str) -> None:
    """A long float32 column sum is off from the exact sum by no more than eager's is."""
    torch.manual_seed(0)
    fn = script_from_source("def f(x):\n    return (x * 1.0).sum(0)\n")
    with fuser.enabled(True):
        for n in [1517, 100000]:
            x = torch.randn(n, 40, device=device)
            got = run_optimized(fn, x)
            exact = x.double().sum(0)
            eager_error = (x.sum(0).double() - exact).abs().max().item()
            fused_error = (got.double() - exact).abs().max().item()
            assert fused_error <= 2 * eager_error + 1e-5 * n**0.5, (n, fused_error, eager_error)
    assert fuser.stats()["row_launches"] >= 2


def groups_of(fn: object, *args: torch.Tensor) -> list[set[str]]:
    graph = fn.graph_for(*args)  # type: ignore[attr-defined]
    return [
        {n.kind() for n in node.g("Subgraph").nodes()}
        for node in all_nodes(graph)
        if node.kind() == FUSION_GROUP
    ]


def test_a_whole_output_joins_the_column_sum_and_dropout_stays_out(fused: None) -> None:
    """The product is also returned whole: the column kernel stores it in the walk that
    sums it, so product and sum make one group. Dropout numbers elements as eager does,
    which a column walk does not: it does not join a leading-dim reduction."""
    x, y = torch.randn(30, 20), torch.randn(30, 20)
    whole = script_from_source(fn_of("d = x * y", "return d, d.sum(0)"))
    got = run_optimized(whole, x, y)
    torch.testing.assert_close(got[0], x * y, rtol=0, atol=0)
    torch.testing.assert_close(got[1], (x * y).sum(0), rtol=1e-5, atol=1e-5)
    assert any("aten::mul" in kinds and "aten::sum" in kinds for kinds in groups_of(whole, x, y))

    dropped = script_from_source(
        fn_of("return torch.nn.functional.dropout(x * y, 0.5, True).sum(0)")
    )
    torch.manual_seed(1)
    run_optimized(dropped, x, y)
    for kinds in groups_of(dropped, x, y):
        assert not ("aten::dropout" in kinds and "aten::sum" in kinds), kinds


@pytest.mark.skipif(
    not torch.cuda.is_available() and os.environ.get("FUSER_CROSS_COMPILE") is None,
    reason="needs CUDA, or FUSER_CROSS_COMPILE for the CUDA forms of CPU kernels",
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("splits", [16], indirect=True)
def test_cuda_columns_last_stage_takes_one_row_per_thread(dtype: torch.dtype, splits: int) -> None:
    """CUDA columns cut in slices: the stages that walk a slice give each thread a vector
    of neighbouring rows (16 bytes of them), the last, which only combines each row's
    partials, one row per thread: spread over 8x (float16) the threads, it took 2.9 us
    instead of 15.9 on the H100 for a float16 column variance of 32768 x 1024."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x, y = inputs(device, dtype, (2000, 256))
    before = len(fuser.kernel_sources())
    with fuser.enabled(True):
        compare(fn_of("return (x - y).var(0)"), x, y, dtype=dtype, case=case_tolerance(dtype))
    assert fuser.stats()["staged_calls"] >= 1, fuser.stats()
    new = fuser.kernel_sources()[before:]
    stages = [s for s in new if "__global__" in s and "fx_welford<float> fx_" in s]
    walking = [s for s in stages if "fx_acc" in s]
    last = [s for s in stages if "fx_fin" in s and "fx_acc" not in s]
    per_thread = 16 // dtype.itemsize
    assert walking and last, len(stages)
    assert all(f"fx_units = (fx_rows + {per_thread} - 1) / {per_thread};" in s for s in walking)
    assert all("fx_units = (fx_rows + 1 - 1) / 1;" in s for s in last)


@pytest.mark.skipif(
    not torch.cuda.is_available() and os.environ.get("FUSER_CROSS_COMPILE") is None,
    reason="needs CUDA, or FUSER_CROSS_COMPILE for the CUDA forms of CPU kernels",
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_cuda_column_sums_add_each_step_in_float(dtype: torch.dtype) -> None:
    """A CUDA column walk keeps a float sum in double but adds each unrolled step's
    elements in float first, then the step's sum in double (a conversion to double is a
    quarter-rate instruction), and asks for 2 resident blocks so that the compiler gives
    a step's vector loads registers enough to be in flight together (a float16 column
    sum of 32768 x 1024 on the H100: 66.7 us without, 53.7 with). Values stay eager's
    within the reduction tolerance."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x, y = inputs(device, dtype, (3000, 512))
    before = len(fuser.kernel_sources())
    with fuser.enabled(True):
        compare(fn_of("return (x * y - 0.5).sum(0)"), x, y, dtype=dtype, case=case_tolerance(dtype))
    walking = [
        s for s in fuser.kernel_sources()[before:] if "__global__" in s and "double fx_acc" in s
    ]
    assert walking
    for s in walking:
        (r,) = set(re.findall(r"double fx_acc(\d+)\[", s))
        assert f"fx_step{r}[fx_j] = fx_combine_sum<float>(fx_step{r}[fx_j]" in s
        assert f"fx_acc{r}[fx_j] += (double)fx_step{r}[fx_j];" in s
        assert "__launch_bounds__(256, 2)" in s


@pytest.mark.skipif(
    not torch.cuda.is_available() and os.environ.get("FUSER_CROSS_COMPILE") is None,
    reason="needs CUDA, or FUSER_CROSS_COMPILE for the CUDA forms of CPU kernels",
)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
def test_cuda_column_steps_only_for_float_sums(dtype: torch.dtype) -> None:
    """Only float sums widened to double take float steps: a float64 minimum (whose
    accumulator is a double too) or a float64 sum combine each element as it comes."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x, y = inputs(device, dtype, (3000, 256))
    before = len(fuser.kernel_sources())
    with fuser.enabled(True):
        compare(fn_of("return (x + y).amin(0), (x - y).sum(0)"), x, y, dtype=dtype, case="sum")
    walking = [s for s in fuser.kernel_sources()[before:] if "__global__" in s and "fx_acc" in s]
    assert walking
    for s in walking:
        stepped = set(re.findall(r"float fx_step(\d+)\[", s))
        summed = set(re.findall(r"double fx_acc(\d+)\[", s)) if dtype == torch.float32 else set()
        assert stepped <= summed, (stepped, summed)


class ChannelsFirstLayerNorm(torch.nn.Module):
    """ConvNeXt's LayerNorm for NCHW activations, written out over dim 1."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(channels) + 0.5)
        self.bias = torch.nn.Parameter(torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + 1e-6)
        return self.weight[:, None, None] * x + self.bias[:, None, None]


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("memory_format", ["contiguous", "channels_last"])
def test_a_frozen_convnext_stem_normalizes_its_channels_in_one_group(
    device: str, batch: int, memory_format: str
) -> None:
    """A ConvNeXt stem as deployed (scripted, frozen, no grad): convolution, then the
    channels-first LayerNorm, then a convolution. The statistics over C, the
    normalization and the per-channel affine are one group, whose kernel stores the
    normalized activation whole (NCHW over its channels: rows are columns; the model
    and its input channels-last: rows are runs); values, shape and strides are eager's."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 48, 4, stride=4),
        ChannelsFirstLayerNorm(48),
        torch.nn.Conv2d(48, 24, 1),
    ).eval()
    model = model.to(device)
    x = torch.randn(batch, 3, 64, 48, device=device)
    if memory_format == "channels_last":
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    # CUDA convolutions in TF32 (cuDNN's default) differ from run to run by more than the
    # tolerance when freezing changes the weights' layout: compared in full float32.
    with torch.no_grad(), torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        want = model(x)
        frozen = torch.jit.freeze(torch.jit.script(model))
        fuser.reset_stats()
        with fuser.enabled(True):
            got = run_optimized(frozen, x)
            graph = torch.jit.last_executed_optimized_graph()
    assert got.shape == want.shape and got.stride() == want.stride()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    groups = [n for n in all_nodes(graph) if n.kind() == FUSION_GROUP]
    kinds = [{m.kind() for m in g.g("Subgraph").nodes()} for g in groups]
    assert any({"aten::mean", "aten::sqrt", "aten::div"} <= k for k in kinds), kinds
    stats = fuser.stats()
    assert stats["interpreted_runs"] == 0 and stats["cuda_cross_compile_failures"] == 0, stats


# Whole outputs beside reductions whose rows are runs in memory: x and y [3, 24, 9, 7]
# channels-last, reduced over their channels (a row kernel, not columns).
RUNS_CASES = {
    "layer_norm_channels": CASES["layer_norm_channels"],
    "centred_channels": CASES["centred_channels"],
    "whole_beside_sum": fn_of("d = x * y", "return d, d.sum(1)"),
    "softmax_channels": fn_of(
        "e = torch.exp(x - x.amax(1, keepdim=True))", "return e / e.sum(1, keepdim=True) + y"
    ),
    "variance_then_scale": fn_of(
        "v = x.var(1, keepdim=True, unbiased=False)", "return (x - y) * torch.rsqrt(v + 1e-5)"
    ),
}


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", sorted(RUNS_CASES))
def test_whole_outputs_beside_channels_that_are_runs(
    case: str, dtype: torch.dtype, device: str
) -> None:
    """Over a channels-last activation each position's channels are one run in memory,
    so statistics over C are a row kernel's rows, and eager's layout of a whole output
    (channels-last too) keeps each row one run: the row kernel stores it there, in the
    same group as the statistics it needs. Values, shapes and strides are eager's."""
    x, y = (
        t.contiguous(memory_format=torch.channels_last)
        for t in inputs(device, dtype, (3, 24, 9, 7))
    )
    with fuser.enabled(True):
        fn = compare(RUNS_CASES[case], x, y, dtype=dtype, case=case_tolerance(dtype))
    stats = fuser.stats()
    assert stats["interpreted_runs"] == 0 and stats["cuda_cross_compile_failures"] == 0, stats
    assert stats["groups_formed"] == 1 and stats["row_launches"] >= 2, stats
    kinds = subgraph_kinds(fn, x, y)
    assert kinds & {"aten::mean", "aten::sum", "aten::amax", "aten::var"}, kinds
    assert kinds & {"aten::sub", "aten::mul", "aten::div"}, kinds


@pytest.mark.parametrize("device", devices())
def test_rows_of_runs_over_two_reduced_dims_and_layouts_that_disagree(device: str) -> None:
    """Reduced dims 1 and 3 of a permuted tensor whose strides make them one run
    (strides 8 and 1): rows of runs, the whole output stored beside the mean in one
    group. Two operands whose rows are runs with their dims in other orders, and
    operands laid out otherwise (a channels-last and a row-major one, whose
    rows over C are runs in the first and not in the second) do not meet in a group
    with a whole output beside the mean: their product is computed before it, and the
    reducing group reads the product, laid out as the first; values and strides stay
    eager's either way."""
    x = torch.randn(4, 5, 6, 8, device=device).permute(0, 2, 1, 3)
    assert x.stride() == (240, 8, 48, 1)
    text = "def f(x):\n    return x - x.mean([1, 3], keepdim=True)\n"
    with fuser.enabled(True):
        fn = compare(text, x, case="sum")
    stats = fuser.stats()
    assert stats["groups_formed"] == 1 and stats["interpreted_runs"] == 0, stats
    assert {"aten::mean", "aten::sub"} <= subgraph_kinds(fn, x)

    # Both operands' rows are runs, in other orders of their dims (x: W innermost, y: C):
    # a row kernel would read one of them across strides; no call runs interpreted.
    y = torch.randn(4, 5, 8, 6, device=device).permute(0, 3, 1, 2)
    assert y.stride() == (240, 1, 48, 6)
    fuser.reset_stats()
    with fuser.enabled(True):
        compare(
            "def f(x, y):\n    return (x + y) - (x + y).mean([1, 3], keepdim=True)\n",
            x,
            y,
            case="sum",
        )
    assert fuser.stats()["interpreted_runs"] == 0, fuser.stats()

    x = torch.randn(3, 24, 9, 7, device=device).contiguous(memory_format=torch.channels_last)
    y = torch.randn(3, 24, 9, 7, device=device)
    fuser.reset_stats()
    with fuser.enabled(True):
        fn = compare(fn_of("return x * y - (x * y).mean(1, keepdim=True)"), x, y, case="sum")
    stats = fuser.stats()
    assert stats["interpreted_runs"] == 0, stats
    mean_groups = [
        kinds
        for kinds in (
            {m.kind() for m in n.g("Subgraph").nodes()}
            for n in all_nodes(torch.jit.last_executed_optimized_graph())
            if n.kind() == FUSION_GROUP
        )
        if "aten::mean" in kinds
    ]
    assert mean_groups and all("aten::mul" not in kinds for kinds in mean_groups), mean_groups


@pytest.mark.skipif(
    torch.cuda.is_available() or os.environ.get("FUSER_CROSS_COMPILE") is None,
    reason="FUSER_CROSS_COMPILE on a machine without CUDA compiles every CUDA variant",
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_cuda_column_variants_are_compiled_in_three_vector_widths(dtype: torch.dtype) -> None:
    """The CUDA forms of a column kernel, one per vector width that CUDA times (16, 8
    and 4 bytes of rows per thread: test_variants.py), each compile."""
    x, y = inputs("cpu", dtype, (40, 24, 9, 8))
    before = len(fuser.kernel_sources())
    with fuser.enabled(True):
        compare(CASES["layer_norm_channels"], x, y, dtype=dtype, case=case_tolerance(dtype))
    stats = fuser.stats()
    assert stats["cuda_cross_compiles"] >= 3 and stats["cuda_cross_compile_failures"] == 0, stats
    new = [s for s in fuser.kernel_sources()[before:] if "__global__" in s]
    widest = 16 // dtype.itemsize
    for width in (widest, widest // 2, widest // 4):
        assert any(f"fx_units = (fx_rows + {width} - 1) / {width};" in s for s in new), width
