"""Reductions, normalizations and softmax over trailing dims fuse with the elementwise
ops around them into one row kernel (ops/reductions.h, runtime/row_executor.h): values,
dtypes, shapes and strides equal eager's for every floating dtype, reduced dims, size-1
and ragged rows; calls the row kernel cannot serve (non-contiguous inputs, empty tensors,
bad layer_norm weights) run the group's subgraph and match eager, errors included. On
CPU runs with FUSER_CROSS_COMPILE the CUDA form of every row kernel passes NVRTC too."""

from __future__ import annotations

import pytest
import torch
from test_layer_norm_backward import TOLERANCE as LAYER_NORM_TOLERANCE
from test_random_training import training_step

import fuser
from helpers import (
    FUSION_GROUP,
    all_nodes,
    calls_on_threads,
    devices,
    eager_from_source,
    fused_kinds,
    run_optimized,
    script_from_source,
)

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def fn_of(*lines: str, params: str = "x") -> str:
    """A function f(`params`) of these body lines."""
    return f"def f({params}):\n" + "".join(f"    {line}\n" for line in lines)


# Each reduces the last dims of x, between an elementwise prologue and epilogue.
CASES = {
    "sum": fn_of("return (x * 2.0).sum(-1, keepdim=True) + 1.0"),
    "sum_two_dims": fn_of("return (x * 2.0).sum([-2, -1], keepdim=True) - 1.0"),
    "sum_dropped": fn_of("return (x * 2.0).sum(-1)"),
    "mean": fn_of("y = x - 1.0", "return y / y.mean(-1, keepdim=True).abs()"),
    "amax": fn_of("return torch.exp(x - (x * 1.5).amax(-1, keepdim=True))"),
    "amin_dropped": fn_of("return (x + 1.0).amin(-1)"),
    "var": fn_of("return (x + 3.0).var(-1, keepdim=True) * 0.5"),
    "var_biased": fn_of("return (x + 3.0).var(-1, False, True) * 0.5"),
    "var_correction": fn_of("return torch.var(x * 2.0, [-1], correction=0, keepdim=True) + x"),
    "std": fn_of(
        "y = x * 2.0",
        "return (y - y.mean(-1, keepdim=True)) / (y.std(-1, keepdim=True) + 1.0)",
    ),
    "var_mean": fn_of(
        "v, m = torch.var_mean(x * 2.0, [-1], keepdim=True)", "return (x - m) / (v + 1.0).sqrt(), m"
    ),
    "std_mean_dropped": fn_of("s, m = torch.std_mean(x + 1.0, -1, correction=0)", "return s, m"),
    "var_mean_two_dims": fn_of(
        "v, m = torch.var_mean(x - 0.5, [-2, -1], unbiased=False, keepdim=True)",
        "return v * 2.0, m + x",
    ),
    "norm": fn_of("return x / (x * 1.0).norm(2, -1, True)"),
    "softmax": fn_of("return torch.softmax(x * 0.5, -1) * 2.0"),
    "log_softmax": fn_of("return torch.log_softmax(x + 1.0, -1) - 1.0"),
    "two_outputs": fn_of("y = x * 2.0", "m = y.mean(-1, keepdim=True)", "return y - m, m"),
    # The whole tensor: sum(self), mean(self) (its epilogue on the 0-dim result stays
    # out), and a dim of None.
    "sum_whole": fn_of("return ((x - 1.0) * x).sum()"),
    "mean_whole": fn_of("return (x * x).mean() + 1.0"),
    "var_whole": fn_of("return torch.var(x + 1.0, dim=None, keepdim=True)"),
    "std_mean_whole": fn_of("return torch.std_mean(x + 1.0, dim=None, keepdim=True)"),
    # Truth of the whole tensor: bool results, any nonzero (NaN included) or none zero.
    "any_whole": fn_of("return (x * 2.0 > 3.5).any()"),
    "all_whole": fn_of("return torch.isinf(x + 1.0).logical_not().all()"),
}


REDUCTION_NAMES = [
    "sum",
    "mean",
    "amax",
    "amin",
    "var",
    "std",
    "var_mean",
    "std_mean",
    "norm",
    "softmax",
    "log_softmax",
    "any",
    "all",
]


def tolerance(dtype: torch.dtype, case: str = "") -> dict[str, float]:
    """Reductions accumulate in float, eager's in its own order: float16/bfloat16
    results may differ from eager's by a rounding step, and a float32 sum of a long row
    by eager's own rounding error (test_long_sums_are_as_accurate_as_eager's). "rounds
    once" (compare): 16-bit results are checked against a float64 reference instead."""
    if dtype == torch.float32 and case.startswith("sum"):
        return {"rtol": 1e-5, "atol": 1e-4}
    if dtype == torch.float32:  # also for float64 results of float32 reductions
        return {"rtol": 1.3e-6, "atol": 1e-5}
    if dtype == torch.float16:
        return {"rtol": 2e-3, "atol": 2e-3}
    if dtype == torch.bfloat16:
        return {"rtol": 1.6e-2, "atol": 1.6e-2}
    return {}


def subgraph_kinds(fn: object, *args: torch.Tensor) -> set[str]:
    graph = fn.graph_for(*args)  # type: ignore[attr-defined]
    kinds: set[str] = set()
    for node in all_nodes(graph):
        if node.kind() == FUSION_GROUP:
            kinds.update(n.kind() for n in node.g("Subgraph").nodes())
    return kinds


def compare(
    text: str, *args: torch.Tensor, dtype: torch.dtype = torch.float32, case: str = ""
) -> object:
    """Runs `text` scripted (fuser on) and eagerly; checks every output; returns the
    scripted function."""
    fn = script_from_source(text + "\n")
    got = run_optimized(fn, *args)
    want = eager_from_source(text)(*args)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    refs: tuple[torch.Tensor, ...] = ()
    if case == "rounds once" and dtype in (torch.float16, torch.bfloat16):
        wide = [a.double() if a.is_floating_point() else a for a in args]
        ref = eager_from_source(text)(*wide)
        refs = ref if isinstance(ref, tuple) else (ref,)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.shape == w.shape and g.dtype == w.dtype, text
        assert g.stride() == w.stride(), (text, g.stride(), w.stride())
        if refs:
            # Eager rounds every op's result to 16 bits, the kernel only its output: it
            # may differ from eager by more than a rounding step, never be less accurate.
            ulp = torch.finfo(dtype).eps * refs[i].abs().max().item()
            fused_error = (g.double() - refs[i]).abs().max().item()
            eager_error = (w.double() - refs[i]).abs().max().item()
            assert fused_error <= eager_error + ulp, (text, fused_error, eager_error)
            continue
        torch.testing.assert_close(g, w, equal_nan=True, **tolerance(dtype, case))
    return fn


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", sorted(CASES))
def test_reduction_fuses_with_neighbours(case: str, dtype: torch.dtype, device: str) -> None:
    # A ragged row (37), a single-element row dim (1) and more rows than a CUDA block.
    x = torch.randn(6, 1, 41, 37, device=device).to(dtype)
    with fuser.enabled(True):
        fn = compare(CASES[case], x, dtype=dtype, case=case)
    stats = fuser.stats()
    assert stats["row_launches"] >= 2, stats
    assert stats["interpreted_runs"] == 0 and stats["cuda_cross_compile_failures"] == 0, stats
    reductions = {"aten::" + name for name in REDUCTION_NAMES}
    assert subgraph_kinds(fn, x) & reductions, case


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_with_residual_and_bias(dtype: torch.dtype, device: str, affine: bool) -> None:
    text = (
        "def f(x, r, b, w, wb):\n"
        "    h = x + b + r\n"
        "    return h, torch.nn.functional.gelu(torch.layer_norm(h, [96], w, wb, 1e-5))\n"
    )
    if not affine:
        text = text.replace("[96], w, wb,", "[96], None, None,")
    x, r = (torch.randn(3, 50, 96, device=device).to(dtype) for _ in range(2))
    b, w, wb = (torch.randn(96, device=device).to(dtype) for _ in range(3))
    with fuser.enabled(True):
        fn = compare(text, x, r, b, w, wb, dtype=dtype)
    assert fuser.stats()["row_launches"] >= 2
    assert {"aten::layer_norm", "aten::gelu", "aten::add"} <= subgraph_kinds(fn, x, r, b, w, wb)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("row", [1, 31, 32, 33, 1000, 1025, 5000, 40000])
def test_row_lengths(device: str, row: int) -> None:
    """Rows of every length class: under a warp, a warp, several warps, a whole block
    and more than a block's threads take more than one element each."""
    x = torch.randn(7, row, device=device)
    with fuser.enabled(True):
        compare("def f(x):\n    return torch.softmax(x * 0.5, -1) + x.mean(-1, keepdim=True)", x)
    assert fuser.stats()["row_launches"] >= 2


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16], ids=str)
@pytest.mark.parametrize("row", [5000, 70000, 300000])
def test_long_rows_keep_their_exponentials(device: str, dtype: torch.dtype, row: int) -> None:
    """CPU rows past 4096 elements keep softmax's exp in the row of an output of its own
    type (float32, float64: any length) or in a per-thread buffer (float16's float exp,
    rows up to 2^18; longer rows compute it twice); two outputs read the kept values."""
    x = torch.randn(3, row, device=device).to(dtype)
    text = "def f(x):\n    y = torch.softmax(x, -1)\n    return y, y * 2.0 + x"
    with fuser.enabled(True):
        compare(text, x, dtype=dtype)
    assert fuser.stats()["row_launches"] >= 2


def test_threads_keep_their_own_row_buffers() -> None:
    """float16 rows of 5000 keep their float exponentials in a buffer each thread keeps
    (FxThreadBuffer); calls on four threads at once each get eager's rows."""
    fn = script_from_source(
        "def f(x):\n    y = torch.softmax(x * 0.6875, -1)\n    return y, y + x\n"
    )
    cases = [torch.randn(3, 5000).half() for _ in range(4)]
    want = [torch.softmax(x * 0.6875, -1) for x in cases]
    before = len(fuser.kernel_sources())
    with fuser.enabled(True):
        for _ in range(3):
            fn(cases[0])
        assert any("FxThreadBuffer<float> fx_heap" in k for k in fuser.kernel_sources()[before:])
        got = calls_on_threads(lambda i: fn(cases[i])[0], len(cases))
    for i, outs in enumerate(got):
        assert len(outs) == 10
        for out in outs:
            torch.testing.assert_close(out, want[i])


@pytest.mark.parametrize("device", devices())
def test_new_shapes_reuse_the_kernel(device: str) -> None:
    """Kernels are not specialized on sizes: after each shape class was met once, new
    sizes of the same classes compile nothing. A new rank goes through the guard to the
    fallback, which profiles its first call: each rank is called until optimized."""
    fn = script_from_source(CASES["softmax"] + "\n")
    eager = eager_from_source(CASES["softmax"])

    def run(shapes: list[tuple[int, ...]]) -> None:
        for shape in shapes:
            x = torch.randn(shape, device=device)
            torch.testing.assert_close(fn(x), eager(x))

    with fuser.enabled(True):
        run([(4, 8), (4, 8), (4, 8), (9, 2), (2, 5, 300), (2, 5, 300), (2, 5, 300)])
        built = fuser.stats()["kernels_compiled"] + fuser.stats()["disk_cache_hits"]
        run([(7, 8), (9, 6), (3, 4, 300), (2, 7, 296)])
    stats = fuser.stats()
    assert stats["interpreted_runs"] == 0 and stats["row_launches"] >= 7, stats
    assert stats["kernels_compiled"] + stats["disk_cache_hits"] == built, stats


@pytest.mark.parametrize("device", devices())
def test_nan_and_inf_propagate_as_in_eager(device: str) -> None:
    x = torch.randn(5, 9, device=device)
    x[1, 3] = float("nan")
    x[2, :] = float("-inf")
    x[3, 4] = float("inf")
    for case in ["amax", "softmax", "log_softmax", "sum", "amin_dropped"]:
        with fuser.enabled(True):
            compare(CASES[case], x)


# transformers' float16 overflow guard (T5): the residual sum checked for infinities,
# then clamped below the largest finite value where one is found.
OVERFLOW_GUARD = fn_of(
    "h = x + r",
    "big = torch.isinf(h).any()",
    "top = torch.full_like(h[0, 0, 0], 65504.0)",
    "v = torch.where(big, top - 1000.0, top)",
    "return torch.clamp(h, min=-v, max=v) * 0.5",
    params="x, r",
)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_any_all_and_isinf_match_eager(device: str, dtype: torch.dtype) -> None:
    x = torch.randn(4, 8, 16, device=device).to(dtype)
    r = torch.randn(4, 8, 16, device=device).to(dtype)
    with fuser.enabled(True):
        fn = compare(OVERFLOW_GUARD, x, r, dtype=dtype)  # no infinity: not clamped
        x[1, 2, 3] = float("inf")
        compare(OVERFLOW_GUARD, x, r, dtype=dtype)
        x[1, 2, 3] = float("-inf")
        compare(OVERFLOW_GUARD, x, r, dtype=dtype)
    assert {"aten::isinf", "aten::any"} <= subgraph_kinds(fn, x, r)
    # Every answer of any and all: none, one, all set; NaN counts as nonzero.
    truth = {
        "any": fn_of("return (x * 1.0).any()"),
        "all": fn_of("return (x * 1.0).all()"),
        "isinf": fn_of("return torch.isinf(x * 2.0)"),
    }
    values = torch.zeros(3, 5, 7, device=device, dtype=dtype)
    for fill in ["none", "one", "all", "nan"]:
        v = values.clone()
        if fill == "one":
            v[2, 4, 6] = 1.5
        elif fill == "all":
            v.fill_(-2.0)
        elif fill == "nan":
            v[0, 1, 2] = float("nan")
        with fuser.enabled(True):
            for name, text in truth.items():
                got = compare(text, v, dtype=dtype)
                assert subgraph_kinds(got, v) & {"aten::any", "aten::all", "aten::isinf"}, name


@pytest.mark.parametrize("device", devices())
def test_any_and_all_of_integers_bools_and_empty_tensors_match_eager(device: str) -> None:
    with fuser.enabled(True):
        for x in [
            torch.randint(-2, 3, (6, 9), device=device),
            torch.rand(6, 9, device=device) > 0.9,
            torch.randn(0, 9, device=device),
        ]:
            compare(fn_of("return (x + x).any(), (x * x).all()"), x)
        # uint8's any and all are uint8 in eager: left to it.
        u = torch.randint(0, 3, (6, 9), device=device, dtype=torch.uint8)
        fn = compare(fn_of("return (u + u).any()", params="u"), u)
        assert "aten::any" not in subgraph_kinds(fn, u)


@pytest.mark.parametrize("device", devices())
def test_calls_the_row_kernel_cannot_serve_match_eager(device: str) -> None:
    """Non-contiguous inputs (eager's outputs keep their layout), broadcast-only inputs
    and empty tensors run the group's subgraph instead."""
    text = "def f(x, y):\n    return torch.softmax(x * y, -1) + 1.0"
    fn = script_from_source(text + "\n")
    eager = eager_from_source(text)
    with fuser.enabled(True):
        x, y = torch.randn(6, 10, device=device), torch.randn(6, 10, device=device)
        run_optimized(fn, x, y)
        assert fuser.stats()["row_launches"] >= 1
        for args in [
            (torch.randn(10, 6, device=device).t(), y),
            (torch.randn(6, 1, device=device), torch.randn(1, 10, device=device)),
            (torch.randn(0, 10, device=device), torch.randn(0, 10, device=device)),
            (torch.randn(6, 0, device=device), torch.randn(6, 0, device=device)),
        ]:
            got, want = fn(*args), eager(*args)
            assert got.shape == want.shape and got.stride() == want.stride()
            torch.testing.assert_close(got, want)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("width", [64, 37, 6000])
def test_permuted_inputs_keep_eager_layouts(device: str, dtype: torch.dtype, width: int) -> None:
    """A transposed activation beside a contiguous one (batch_first attention hands the
    encoder [T, B, C] memory as [B, T, C]): the residual sum keeps the transposed layout,
    layer_norm's output, mean and rstd and a softmax are contiguous, a row sum as eager
    lays it out; the row kernel stores each output through its own strides (rows held,
    ragged rows stored a scalar at a time, rows too long to hold), and runs no call
    interpreted. Another shape of such inputs (whose layouts were not profiled) runs a
    kernel too: its outputs take eager's layout of that call, by ATen's rules."""
    text = fn_of(
        "h = x + y * 2.0",
        f"out, mean, rstd = torch.native_layer_norm(h, [{width}], w, b, 1e-5)",
        "return h, out, mean, rstd, torch.softmax(h, -1), h.sum(-1)",
        params="x, y, w, b",
    )

    def inputs(batch: int) -> tuple[torch.Tensor, ...]:
        x = torch.randn(33, batch, width, device=device, dtype=dtype).transpose(0, 1)
        y = torch.randn(batch, 33, width, device=device, dtype=dtype)
        w, b = (torch.randn(width, device=device, dtype=dtype) for _ in range(2))
        return x, y, w, b

    args = inputs(4)
    with fuser.enabled(True):
        # (case "sum": a float32 row sum differs from eager's by eager's rounding error)
        fn = compare(text, *args, dtype=dtype, case="sum")
        assert {"aten::native_layer_norm", "aten::softmax"} <= subgraph_kinds(fn, *args)
        fuser.reset_stats()
        fn(*args)
    stats = fuser.stats()
    assert stats["row_launches"] == 1 and stats["interpreted_runs"] == 0, stats
    assert stats["cuda_cross_compile_failures"] == 0, stats  # FUSER_CROSS_COMPILE in CI
    other = inputs(3)
    fuser.reset_stats()
    with fuser.enabled(True):
        got = fn(*other)
    assert fuser.stats()["interpreted_runs"] == 0, fuser.stats()
    want = eager_from_source(text)(*other)
    for g, w in zip(got, want, strict=True):
        assert g.stride() == w.stride()
        torch.testing.assert_close(g, w, **tolerance(dtype, "sum"))


@pytest.mark.parametrize("device", devices())
def test_layer_norm_with_a_wrong_weight_raises_as_eager(device: str) -> None:
    text = "def f(x, w):\n    return torch.layer_norm(x * 2.0, [8], w, None, 1e-5) + 1.0\n"
    fn = script_from_source(text)
    with fuser.enabled(True):
        run_optimized(fn, torch.randn(4, 8, device=device), torch.randn(8, device=device))
        assert fuser.stats()["row_launches"] >= 1
        with pytest.raises(RuntimeError, match="weight"):
            eager_from_source(text)(torch.randn(4, 8, device=device), torch.randn(1, device=device))
        with pytest.raises(RuntimeError, match="weight"):
            fn(torch.randn(4, 8, device=device), torch.randn(1, device=device))


def test_reductions_over_other_dims_stay_unfused(fused: None) -> None:
    """Two reductions over different trailing dims do not make one row group. A softmax
    over a dim before the last makes one of its own, walked as columns
    (test_softmax_over_leading_dims.py)."""
    lead = script_from_source("def f(x):\n    return torch.softmax(x * 2.0, 1) + 1.0\n")
    mixed = script_from_source(
        fn_of("y = x * 2.0", "return y.sum(-1, keepdim=True) + y.sum([-2, -1], keepdim=True)")
    )
    x = torch.randn(4, 5, 6)
    for fn in [lead, mixed]:
        run_optimized(fn, x)
        for node in all_nodes(fn.graph_for(x)):
            if node.kind() != FUSION_GROUP:
                continue
            reductions = [
                n for n in node.g("Subgraph").nodes() if n.kind() in ("aten::sum", "aten::softmax")
            ]
            assert len(reductions) <= 1
            if fn is lead:
                assert [n.kind() for n in reductions] == ["aten::softmax"]
    torch.testing.assert_close(lead(x), torch.softmax(x * 2.0, 1) + 1.0)


def test_a_dropped_reduction_does_not_feed_a_group(fused: None) -> None:
    fn = script_from_source("def f(x):\n    return (x * 2.0).sum(-1) + 1.0\n")
    x = torch.randn(4, 6)
    got = run_optimized(fn, x)
    torch.testing.assert_close(got, (x * 2.0).sum(-1) + 1.0)
    for node in all_nodes(fn.graph_for(x)):
        if node.kind() == FUSION_GROUP:
            subgraph = list(node.g("Subgraph").nodes())
            sums = [n for n in subgraph if n.kind() == "aten::sum"]
            adds = [n for n in subgraph if n.kind() == "aten::add"]
            assert not (sums and adds)


@pytest.mark.parametrize("device", devices())
def test_long_sums_are_as_accurate_as_eager(device: str) -> None:
    """A float32 row sum is off from the exact sum by no more than eager's is (a little
    slack for rows where eager happens to be nearly exact)."""
    torch.manual_seed(0)
    fn = script_from_source("def f(x):\n    return (x * 1.0).sum(-1, keepdim=True) + 0.0\n")
    with fuser.enabled(True):
        for n in [1517, 40000, 300000]:
            x = torch.randn(8, n, device=device)
            got = run_optimized(fn, x)
            exact = x.double().sum(-1, keepdim=True)
            eager_error = (x.sum(-1, keepdim=True).double() - exact).abs().max().item()
            fused_error = (got.double() - exact).abs().max().item()
            assert fused_error <= 2 * eager_error + 1e-5 * n**0.5, (n, fused_error, eager_error)
    assert fuser.stats()["row_launches"] >= 3


@pytest.mark.parametrize("device", devices())
def test_long_softmax_rows_are_as_accurate_as_eager(device: str) -> None:
    """Softmax sums its exponentials in float, as eager's kernels do: over long rows its
    error against a float64 softmax stays within three times eager's (plus a rounding
    step). Eager's error depends on its vector width: on the H100 machine's CPU, rows of
    40000 gave eager 2.9e-6 and the fused kernel 6.1e-6."""
    torch.manual_seed(0)
    fn = script_from_source("def f(x):\n    return torch.softmax(x * 1.0, -1) + 0.0\n")
    with fuser.enabled(True):
        for n in [1517, 40000, 300000]:
            x = torch.randn(8, n, device=device) * 4.0
            got = run_optimized(fn, x)
            exact = torch.softmax(x.double(), -1)
            eager_error = (torch.softmax(x, -1).double() - exact).abs().max().item()
            fused_error = (got.double() - exact).abs().max().item()
            ulp = torch.finfo(torch.float32).eps * exact.abs().max().item()
            assert fused_error <= 3 * eager_error + ulp, (n, fused_error, eager_error)
    assert fuser.stats()["row_launches"] >= 3


@pytest.mark.parametrize("device", devices())
def test_a_lone_reduction_forms_a_group(device: str) -> None:
    """A row kernel alone beats or ties ATen's layer_norm and softmax (groups.h)."""
    fn = script_from_source("def f(x, w, b):\n    return torch.layer_norm(x, [64], w, b, 1e-5)\n")
    x, w, b = (
        torch.randn(32, 64, device=device),
        torch.randn(64, device=device),
        torch.randn(64, device=device),
    )
    with fuser.enabled(True):
        got = run_optimized(fn, x, w, b)
    torch.testing.assert_close(got, torch.layer_norm(x, [64], w, b, 1e-5))
    assert fuser.stats()["row_launches"] >= 1


@pytest.mark.parametrize("device", devices())
def test_type_as_of_a_reduced_value_keeps_its_shape(device: str) -> None:
    """type_as and to read their other tensor for its dtype only: the result keeps the
    reduced value's shape."""
    x, y = torch.randn(16, 64, device=device), torch.randn(16, 64, device=device).double()
    with fuser.enabled(True):
        compare(
            fn_of("m = (x * 2.0).mean(-1, keepdim=True)", "return m.type_as(y) * 3.0").replace(
                "f(x)", "f(x, y)"
            ),
            x,
            y,
        )
        compare(
            fn_of("return (x * 2.0).amax(-1, keepdim=True).to(y) + 1.0").replace("f(x)", "f(x, y)"),
            x,
            y,
        )


@pytest.mark.parametrize("device", devices())
def test_a_chunk_feeding_a_reduction(device: str) -> None:
    """Chunks do not join a group that reduces; the result is eager's."""
    text = fn_of("a, b = (x * 2.0).chunk(2, -1)", "return torch.softmax(a, -1) * b")
    with fuser.enabled(True):
        compare(text, torch.randn(8, 32, device=device))


@pytest.mark.parametrize("device", devices())
def test_layer_norm_of_another_width_raises_as_eager(device: str) -> None:
    """The guard fixes ranks, not sizes: a later call whose rows are not the normalized
    shape raises as eager does."""
    text = "def f(x):\n    return torch.layer_norm(x * 2.0, [64], None, None, 1e-5) + 1.0\n"
    fn = script_from_source(text)
    with fuser.enabled(True):
        run_optimized(fn, torch.randn(16, 64, device=device))
        assert fuser.stats()["row_launches"] >= 1
        with pytest.raises(RuntimeError, match="normalized_shape"):
            eager_from_source(text)(torch.randn(4, 32, device=device))
        with pytest.raises(RuntimeError, match="normalized_shape"):
            fn(torch.randn(4, 32, device=device))


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("shape_expr", ["x.shape[-1:]", "[x.size(-1)]"])
def test_normalized_shape_from_the_input_sizes_is_pinned(device: str, shape_expr: str) -> None:
    """A normalized_shape computed from the input's sizes (`F.layer_norm(x,
    x.shape[-1:], w, b)`) is no constant: the guard pins it to the weight's profiled
    sizes (its `lists`), which eager requires it to equal, and the group reads it as a
    constant. A call of another width runs the fallback (eager's values); a list the
    input's rows disagree with raises as eager does; without a weight nothing fixes the
    list, and layer_norm stays ATen's."""
    text = fn_of(
        f"return torch.nn.functional.layer_norm(x * 2.0, {shape_expr}, w, b, 1e-5) + 1.0",
        params="x, w, b",
    )
    args = [torch.randn(4, 6, 96, device=device), torch.randn(96, device=device)]
    args.append(torch.randn(96, device=device))
    with fuser.enabled(True):
        fn = compare(text, *args)
        assert fuser.stats()["row_launches"] >= 1 and fuser.stats()["guard_failures"] == 0
        graph = torch.jit.last_executed_optimized_graph()
        (guard,) = [n for n in all_nodes(graph) if n.kind() == "fuser::TypeGuard"]
        assert getattr(guard, "is")("lists") == [1, 96], graph
        assert "aten::layer_norm" in fused_kinds(graph), graph
        narrow = [torch.randn(5, 32, device=device), torch.randn(32, device=device)]
        narrow.append(torch.randn(32, device=device))
        torch.testing.assert_close(fn(*narrow), eager_from_source(text)(*narrow))
        assert fuser.stats()["guard_failures"] >= 1
        wrong = [torch.randn(5, 32, device=device), args[1], args[2]]
        with pytest.raises(RuntimeError):
            eager_from_source(text)(*wrong)
        with pytest.raises(RuntimeError):
            fn(*wrong)
        fuser.reset_stats()
        compare(fn_of(f"return torch.nn.functional.layer_norm(x, {shape_expr}) * 2.0"), args[0])
        assert fuser.stats()["groups_formed"] == 0, fuser.stats()


@pytest.mark.parametrize("device", devices())
def test_inputs_broadcast_within_and_along_rows(device: str) -> None:
    """Inputs read one value per row ([R, 1]), rows whose dims do not merge into one run
    (an input broadcast along the middle dim), and outputs wider than the inputs (a
    float16 input, float32 results: CUDA stores twice the bytes it loads)."""
    x = torch.randn(6, 5, 40, device=device)
    per_row = torch.randn(6, 5, 1, device=device)
    middle = torch.randn(6, 1, 40, device=device)
    two = "def f(x, y):\n    return "
    with fuser.enabled(True):
        compare(two + "torch.softmax(x * y, -1) + y\n", x, per_row)
        compare(two + "(x + y).sum([-2, -1], keepdim=True) * 0.5\n", x, middle, case="sum")
        compare(
            "def f(x):\n    return torch.softmax(x.float() * 2.0, -1)\n",
            x.half(),
            dtype=torch.float16,
        )
    stats = fuser.stats()
    assert stats["row_launches"] >= 6 and stats["interpreted_runs"] == 0, stats


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dim", [0, -1])
def test_chunks_of_a_reduction_are_not_moved_above_it(device: str, dim: int) -> None:
    """chunk(softmax(x)) is not softmax(chunk(x)): the chunk stays below the reduction
    (along the reduced dim the chunks' rows would be normalized on their own)."""
    text = (
        f"def f(x):\n    a, b = torch.softmax(x * 2.0, -1).chunk(2, {dim})\n    return a * b + 1.0"
    )
    with fuser.enabled(True):
        compare(text, torch.randn(6, 8, device=device))


# float32: the weight's gradient sums 30 rows' products of the saved statistics, which
# the fused forward computes in another order than eager's; 16-bit dtypes as the
# backward's tests.
TRAINING_TOLERANCE = {torch.float32: {"rtol": 1e-5, "atol": 1e-5}, **LAYER_NORM_TOLERANCE}


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_training_forward_fuses_native_layer_norm(device: str, dtype: torch.dtype) -> None:
    """Autodiff's forward computes layer_norm as native_layer_norm and saves its row
    mean and rstd for the backward: the residual add, the norm and the GELU after it
    are one row kernel writing all of them, and every gradient equals eager's (16-bit
    inputs too: their statistics in eager's dtype for the device, or the backward's
    type guards would send every call to its fallback)."""
    text = (
        "def f(x, w, b, r):\n"
        "    h = x + r\n"
        "    return torch.nn.functional.gelu(torch.layer_norm(h, [48], w, b, 1e-5)) * 2.0\n"
    )
    fn, eager = script_from_source(text), eager_from_source(text)
    gen = torch.Generator().manual_seed(0)
    args = [torch.randn(s, generator=gen).to(device, dtype) for s in [(3, 10, 48), 48, 48]]
    args += [torch.randn(3, 10, 48, generator=gen).to(device, dtype)]
    fuser.reset_stats()
    with fuser.enabled(True):
        for _ in range(4):
            ours = [a.clone().requires_grad_() for a in args]
            got = fn(*ours)
            got_grads = torch.autograd.grad((got * got).sum(), ours)
            theirs = [a.clone().requires_grad_() for a in args]
            want = eager(*theirs)
            want_grads = torch.autograd.grad((want * want).sum(), theirs)
            tol = TRAINING_TOLERANCE.get(dtype, {})
            torch.testing.assert_close(got, want, **tol)
            for g, w in zip(got_grads, want_grads, strict=True):
                assert (g.dtype, g.stride()) == (w.dtype, w.stride())
                torch.testing.assert_close(g, w, **tol)
    assert fuser.stats()["row_launches"] >= 2, fuser.stats()
    assert fuser.stats()["guard_failures"] == 0, fuser.stats()
    graph = fn.graph_for(*[a.clone().requires_grad_() for a in args])
    [forward] = [
        n.g("Subgraph") for n in all_nodes(graph) if n.kind() == "prim::DifferentiableGraph"
    ]
    kinds = set()
    for node in all_nodes(forward):
        if node.kind() == FUSION_GROUP:
            kinds.update(n.kind() for n in node.g("Subgraph").nodes())
    assert {"aten::add", "aten::native_layer_norm", "aten::gelu"} <= kinds


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize(
    ("dtype", "params"),
    [(d, "same") for d in DTYPES] + [(torch.float16, "float32"), (torch.bfloat16, "float32")],
    ids=str,
)
def test_native_layer_norm_outputs_and_dtypes(device: str, dtype: torch.dtype, params: str) -> None:
    """Its three outputs (the mean and rstd with the normalized dims kept as 1) match
    eager's values and dtypes: a 16-bit input's statistics are float on CUDA and, on
    CPU, of the input's dtype, float where the weight and bias are float32 (eager's
    mixed types, which its CUDA kernel refuses)."""
    text = (
        "def f(x, w, b):\n"
        "    out, mean, rstd = torch.native_layer_norm(x * 2.0, [5, 8], w, b, 1e-5)\n"
        "    return out + 1.0, mean, rstd\n"
    )
    x = torch.randn(4, 3, 5, 8, device=device).to(dtype)
    param_dtype = dtype if params == "same" else torch.float32
    w, b = (torch.randn(5, 8, device=device).to(param_dtype) for _ in range(2))
    if params == "float32" and device == "cuda":
        # Eager's CUDA kernel refuses mixed dtypes: the scripted call raises as it does.
        with pytest.raises(RuntimeError, match="expected scalar type"):
            eager_from_source(text)(x, w, b)
        with fuser.enabled(True), pytest.raises(RuntimeError, match="expected scalar type"):
            run_optimized(script_from_source(text + "\n"), x, w, b)
        return
    with fuser.enabled(True):
        fn = compare(text, x, w, b, dtype=dtype)
    assert "aten::native_layer_norm" in subgraph_kinds(fn, x, w, b)
    assert fuser.stats()["row_launches"] >= 2, fuser.stats()


GROUP_NORM = (
    "def f(x, w, b, r):\n"
    "    return torch.nn.functional.silu(torch.group_norm(x, {groups}, w, b, 1e-5)) + r\n"
)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    ("shape", "groups"),
    # (2, 8, 4, 4) and (1, 8, 128, 128): rows of several channels whose last dim holds
    # whole CUDA vectors (each vector finds its weight and bias once), held in registers
    # and walked.
    [
        ((2, 8, 5, 5), 4),
        ((3, 12, 7), 3),
        ((2, 6, 3, 4, 2), 6),
        ((5, 4), 1),
        ((2, 8, 33, 33), 2),
        ((2, 8, 4, 4), 2),
        ((1, 8, 128, 128), 2),
    ],
    ids=str,
)
def test_group_norm_fuses_with_neighbours(
    shape: tuple[int, ...], groups: int, dtype: torch.dtype, device: str
) -> None:
    """A row is one group: its channels and every dim after them; the weight and bias
    are read per channel."""
    x, r = (torch.randn(shape, device=device).to(dtype) for _ in range(2))
    w, b = (torch.randn(shape[1], device=device).to(dtype) for _ in range(2))
    text = GROUP_NORM.format(groups=groups)
    with fuser.enabled(True):
        fn = compare(text, x, w, b, r, dtype=dtype, case="rounds once")
    stats = fuser.stats()
    assert stats["row_launches"] >= 2 and stats["interpreted_runs"] == 0, stats
    assert stats["cuda_cross_compile_failures"] == 0, stats
    assert {"aten::group_norm", "aten::silu", "aten::add"} <= subgraph_kinds(fn, x, w, b, r)


@pytest.mark.parametrize("device", devices())
def test_group_norm_without_affine_and_with_odd_calls(device: str) -> None:
    """No weight or bias; then calls the row kernel leaves to eager's group_norm: a
    non-contiguous input, channels the groups do not split and a weight of another
    size (eager raises for both), an empty batch."""
    text = GROUP_NORM.format(groups=2).replace("x, 2, w, b,", "x * 2.0, 2, None, None,")
    x, r = torch.randn(2, 6, 4, 4, device=device), torch.randn(2, 6, 4, 4, device=device)
    w = b = torch.randn(6, device=device)
    with fuser.enabled(True):
        compare(text, x, w, b, r)
        assert fuser.stats()["row_launches"] >= 2
    fn = script_from_source(GROUP_NORM.format(groups=2))
    eager = eager_from_source(GROUP_NORM.format(groups=2))
    with fuser.enabled(True):
        run_optimized(fn, x, w, b, r)
        launches = fuser.stats()["row_launches"]
        assert launches >= 2
        xt = torch.randn(2, 4, 4, 6, device=device).permute(0, 3, 1, 2)
        torch.testing.assert_close(fn(xt, w, b, r), eager(xt, w, b, r))
        x0, r0 = torch.randn(0, 6, 4, 4, device=device), torch.randn(0, 6, 4, 4, device=device)
        torch.testing.assert_close(fn(x0, w, b, r0), eager(x0, w, b, r0))
        x5, r5 = torch.randn(2, 5, 4, 4, device=device), torch.randn(2, 5, 4, 4, device=device)
        with pytest.raises(RuntimeError, match="divisible by num_groups"):
            eager(x5, w[:5], b[:5], r5)
        with pytest.raises(RuntimeError, match="divisible by num_groups"):
            fn(x5, w[:5], b[:5], r5)
        with pytest.raises(RuntimeError):
            eager(x, w[:4], b, r)
        with pytest.raises(RuntimeError):
            fn(x, w[:4], b, r)
        assert fuser.stats()["row_launches"] == launches


def test_group_norm_weight_read_elsewhere_stays_correct() -> None:
    """The weight is read per channel by the group_norm and along the last dim by the
    add (C equals the last dim, so a mix-up would give other values)."""
    text = "def f(x, w, b):\n    return torch.group_norm(x, 2, w, b, 1e-5) + w\n"
    with fuser.enabled(True):
        compare(text, torch.randn(3, 4, 4), torch.randn(4), torch.randn(4))


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.bool], ids=str)
def test_integer_and_bool_sums_are_int64(device: str, dtype: torch.dtype) -> None:
    """Eager sums integers and bools as int64: a mask's count per row, fused with the
    comparison before it and the arithmetic after."""
    text = "def f(x, y):\n    return (x > y).sum(-1, keepdim=True) * 2 + x.sum(-1, keepdim=True)\n"
    x = torch.randint(0, 100, (5, 300), device=device).to(dtype)
    y = torch.randint(0, 100, (5, 300), device=device).to(dtype)
    with fuser.enabled(True):
        fn = compare(text, x, y)
    stats = fuser.stats()
    assert stats["row_launches"] >= 2 and stats["cuda_cross_compile_failures"] == 0, stats
    assert "aten::sum" in subgraph_kinds(fn, x, y)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_dtype_arguments_cast_first(device: str, dtype: torch.dtype) -> None:
    """sum, mean, softmax and log_softmax given a dtype read their input in it, as
    eager does (a float16 softmax computed and returned in float32)."""
    x = torch.randn(6, 77, device=device).to(dtype)
    for call in [
        "torch.softmax(x * 2.0, -1, dtype=torch.float32)",
        "torch.log_softmax(x + 1.0, -1, dtype=torch.float64)",
        "(x * 2.0).sum(-1, keepdim=True, dtype=torch.float32) + 1.0",
        "(x - 1.0).mean(-1, keepdim=True, dtype=torch.float64) * 2.0",
        "(x * 3.0).sum(-1, keepdim=True, dtype=torch.float16) - 1.0",
    ]:
        with fuser.enabled(True):
            compare(f"def f(x):\n    return {call}\n", x, dtype=torch.float16)
    stats = fuser.stats()
    assert stats["row_launches"] >= 10 and stats["cuda_cross_compile_failures"] == 0, stats


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_strided_inputs_of_normalizations_run_as_row_kernels(
    device: str, dtype: torch.dtype
) -> None:
    """An input read only by layer_norm, softmax or log_softmax may be strided if its
    rows are unit-stride runs (a slice of rows, a class token x[:, 0]): eager makes it
    contiguous first, the row kernel reads it in place; results are contiguous as
    eager's. Rows across strides (a permuted NCHW activation) are columns, which the
    column kernel takes (test_softmax_over_leading_dims.py)."""
    w, b = (torch.randn(8, device=device).to(dtype) for _ in range(2))
    inputs = {
        "row_slice": torch.randn(30, 16, device=device).to(dtype)[:, 4:12],
        "class_token": torch.randn(3, 7, 8, device=device).to(dtype)[:, 0],
        "outer_transposed": torch.randn(5, 4, 8, device=device).to(dtype).transpose(0, 1),
    }
    texts = [
        "def f(x, w, b):\n    return torch.layer_norm(x, [8], w, b, 1e-5) * 2.0\n",
        "def f(x, w, b):\n    return torch.log_softmax(x, -1) + torch.softmax(x, -1) * w\n",
    ]
    for name, x in inputs.items():
        for text in texts:
            fuser.reset_stats()
            with fuser.enabled(True):
                compare(text, x, w, b, dtype=dtype)
            stats = fuser.stats()
            assert stats["row_launches"] >= 2 and stats["interpreted_runs"] == 0, (name, stats)
            assert stats["cuda_cross_compile_failures"] == 0, stats
    permuted = torch.randn(2, 8, 5, 6, device=device).to(dtype).permute(0, 2, 3, 1)
    for text in texts:
        fuser.reset_stats()
        with fuser.enabled(True):
            compare(text, permuted, w, b, dtype=dtype)
        stats = fuser.stats()
        assert stats["interpreted_runs"] == 0, stats
        assert stats["row_launches"] >= 1, stats


@pytest.mark.parametrize("device", devices())
def test_reductions_whose_rows_lie_apart(fused: None, device: str) -> None:
    """A mean over H and W of a channels-last activation (a squeeze-excite's), or a
    layer_norm over a permuted NCHW tensor's channels (ConvNeXt's LayerNorm2d): the rows
    are not runs in memory, so the row kernel would run the group interpreted. The
    reduction stays outside every group, even where single nodes make groups, and reads
    the tensor in place through ATen; the elementwise ops around it still fuse. The
    layer_norm's rows are columns the column kernel walks, storing its result through
    its strides (test_softmax_over_leading_dims.py): it joins a group."""
    x = torch.randn(2, 16, 6, 5, device=device).contiguous(memory_format=torch.channels_last)
    w, b = torch.randn(16, device=device), torch.randn(16, device=device)
    cases = {
        "squeeze_excite": (
            fn_of("y = x * torch.sigmoid(x)", "return y, y.mean((2, 3), keepdim=True) * 2.0"),
            (x,),
            "aten::mean",
        ),
        "layer_norm_2d": (
            fn_of(
                "y = torch.layer_norm((x + 1.0).permute(0, 2, 3, 1), [16], w, b, 1e-6)",
                "return y.permute(0, 3, 1, 2) * 2.0",
                params="x, w, b",
            ),
            (x.contiguous(), w, b),
            "aten::layer_norm",
        ),
    }
    for name, (text, args, reduction) in cases.items():
        fuser.reset_stats()
        fn = script_from_source(text)
        got = run_optimized(fn, *args)
        want = eager_from_source(text)(*args)
        for g, e in zip(
            got if isinstance(got, tuple) else (got,),
            want if isinstance(want, tuple) else (want,),
            strict=True,
        ):
            torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
            assert g.stride() == e.stride(), name
        stats = fuser.stats()
        assert stats["interpreted_runs"] == 0 and stats["kernel_launches"] >= 1, (name, stats)
        columns = name == "layer_norm_2d"
        assert (reduction in fused_kinds(fn.graph_for(*args))) == columns, name
    # Rows that are runs (the same tensors row-major) still reduce in a group.
    fuser.reset_stats()
    fn = script_from_source(cases["squeeze_excite"][0])
    run_optimized(fn, x.contiguous())
    assert "aten::mean" in fused_kinds(fn.graph_for(x.contiguous()))
    assert fuser.stats()["row_launches"] >= 1


@pytest.mark.parametrize("device", devices())
def test_layer_norm_backward_over_rows_apart_stays_with_aten(device: str) -> None:
    """MLP-Mixer normalizes a residual stream that eager lays out transposed ([B, T, C]
    over [B, C, T] memory): layer_norm's rows lie apart in memory, so neither its forward
    nor its input gradient forms a group (either would run interpreted); the weight and
    bias gradients, sums over rows of runs, still run as kernels. Gradients are eager's."""

    class Mixer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = torch.nn.LayerNorm(24)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = x.transpose(1, 2) * 2.0
            return torch.sigmoid(self.norm(h)) * h

    torch.manual_seed(0)
    module = Mixer().to(device)
    x = torch.randn(3, 24, 10, device=device, requires_grad=True)
    grad = torch.randn(3, 10, 24, device=device)
    params = [x, *module.parameters()]
    want = torch.autograd.grad(module(x), params, grad)
    with fuser.enabled(True):
        scripted = torch.jit.script(module)
        for _ in range(3):
            got = torch.autograd.grad(scripted(x), [x, *scripted.parameters()], grad)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
        assert g.stride() == w.stride()
    stats = fuser.stats()
    assert stats["interpreted_runs"] == 0 and stats["kernel_launches"] >= 1, stats


def test_mean_into_a_narrower_16_bit_dtype_stays_with_eager() -> None:
    """Eager's CPU mean sums a float32 row in float and rounds once (1e5 / 4 is finite
    in float16); rounding each element first would give inf."""
    text = "def f(x):\n    return (x * 1.0).mean(-1, dtype=torch.float16) + 1.0\n"
    x = torch.tensor([[1e5, 0.0, 0.0, 0.0]] * 4)
    with fuser.enabled(True):
        compare(text, x, dtype=torch.float16)
    assert fuser.stats()["row_launches"] == 0


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_backward_joins_the_gradients_around_it(
    device: str, dtype: torch.dtype, op: str
) -> None:
    """Autodiff's _softmax_backward_data (_log_softmax_backward_data) is a row kernel
    with the gradients before and after it: attention's masked fill and scale. Its
    input_dtype, a value of the forward, is pinned by the guard."""
    source = (
        f"def f(s, mask):\n    return torch.{op}((s * 0.125).masked_fill(mask, -1e4), -1) * 2.0\n"
    )
    fn = script_from_source(source)
    eager = script_from_source(source)
    torch.manual_seed(0)
    s = torch.randn(4, 3, 32, 64, device=device).to(dtype).requires_grad_()
    mask = torch.rand(32, 64, device=device) > 0.7
    upstream = torch.randn(4, 3, 32, 64, device=device).to(dtype)
    fuser.reset_stats()
    with fuser.enabled(True), torch.autograd.set_multithreading_enabled(False):
        for _ in range(4):
            (got,) = torch.autograd.grad(fn(s, mask), s, upstream)
        backward = torch.jit.last_executed_optimized_graph()
    with fuser.enabled(False):
        (want,) = torch.autograd.grad(eager(s, mask), s, upstream)
    assert f"aten::_{op}_backward_data" in fused_kinds(backward), backward
    assert {"aten::masked_fill", "aten::mul"} & fused_kinds(backward), backward
    assert fuser.stats()["interpreted_runs"] == 0, fuser.stats()
    assert (got.dtype, got.stride()) == (want.dtype, want.stride())
    if dtype in (torch.float16, torch.bfloat16):
        # g - sum(g * y) cancels: eager and the kernel sum in float in other orders, and
        # near-zero gradients differ by their rounding. Both against float64's.
        s64 = s.detach().double().requires_grad_()
        (exact,) = torch.autograd.grad(eager(s64, mask), s64, upstream.double())
        fused_error = (got.double() - exact).abs().max().item()
        eager_error = (want.double() - exact).abs().max().item()
        step = torch.finfo(dtype).eps * exact.abs().max().item()
        assert fused_error <= eager_error + step, (fused_error, eager_error, step)
    else:
        torch.testing.assert_close(got, want)


# Training programs whose backward hands a row group the row mean's gradient,
# `grad.expand(...) / n`: the mean subtracted beside a layer_norm of the same value, and
# RMSNorm written out.
CENTRED_BESIDE_NORM = (
    "def f(x, w):\n"
    "    h = x + x\n"
    "    return torch.layer_norm(h, [{n}], w, w, 1e-5), h - h.mean(-1, keepdim=True)\n"
)
RMS_NORM = (
    "def f(x, w):\n    return (x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w,)\n"
)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("width", [40, 1024])
@pytest.mark.parametrize("source", [CENTRED_BESIDE_NORM, RMS_NORM], ids=["centred", "rms"])
def test_gradients_broadcast_along_rows_run_as_row_kernels(
    device: str, width: int, source: str
) -> None:
    """A row mean's gradient reaches the group as one value per row with a row stride
    of 0 ([6, 5, n] of strides [5, 1, 0]): it is read a value per row, and, row-major
    where its strides are not 0, leaves eager's results contiguous. No call runs
    interpreted (the centred program's backward did)."""
    source = source.format(n=width)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 5, width, generator=g).to(device)
    w = (torch.randn(width, generator=g) + 1.0).to(device)
    want = training_step(eager_from_source(source), [x, w], seed=1, calls=1)
    with fuser.enabled(True):
        got = training_step(script_from_source(source), [x, w], seed=1, calls=4)
    for ours, eager in zip(got, want, strict=True):
        assert (ours.shape, ours.stride()) == (eager.shape, eager.stride())
        torch.testing.assert_close(ours, eager, rtol=1e-5, atol=1e-5)
    stats = fuser.stats()
    assert stats["interpreted_runs"] == 0 and stats["row_launches"] >= 1, stats


# Statistics of rows whose elements are all equal. Eager's are exact there (a Welford
# mean of equal values is the value, their variance 0), so a layer_norm of such a row is
# exactly 0 times the weight plus the bias. A mean an ulp off would not be: rstd, up to
# 1 / sqrt(eps), magnifies it (about 4e-5 on values near 1). The normalized rows are
# checked against that exact result, the bias: eager's CPU group_norm and 16-bit
# layer_norm compute x * scale + (bias - mean * scale), off by the rounding of x * scale
# (0.08 on 10000.3 in float32), where the fused kernels give the bias; the mean is
# checked against the row's value.
EQUAL_ROWS = {
    "native_layer_norm": (
        "def f(x, w, b):\n"
        "    out, mean, rstd = torch.native_layer_norm(x * 1.0, [{n}], w, b, 1e-5)\n"
        "    return out, mean, rstd\n"
    ),
    "group_norm": (
        "def f(x, w, b):\n"
        "    return torch.group_norm(x.view(4, 2, {n} // 2) * 1.0, 2, w[:2], b[:2], 1e-5)\n"
    ),
    "var_mean": ("def f(x, w, b):\n    v, m = torch.var_mean(x * 1.0, -1)\n    return v, m\n"),
    "batch_norm_train": (
        "def f(x, w, b):\n"
        "    rm, rv = torch.zeros_like(w[:4]), torch.ones_like(w[:4])\n"
        "    y = torch.batch_norm(\n"
        "        x.unsqueeze(0) * 1.0, w[:4], b[:4], rm, rv, True, 0.1, 1e-5, True\n"
        "    )\n"
        "    return y * 1.0, rm\n"
    ),
    "var_std": (
        "def f(x, w, b):\n"
        "    y = x * 1.0\n"
        "    return y.var(-1), torch.std(y, [-1], correction=0), y.var(-1) * w[0]\n"
    ),
}


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [8, 1000, 40000])
@pytest.mark.parametrize("layout", ["contiguous", "expanded"])
@pytest.mark.parametrize("case", sorted(EQUAL_ROWS))
def test_statistics_of_rows_of_equal_values_are_exact(
    case: str, layout: str, n: int, dtype: torch.dtype, device: str
) -> None:
    """Rows of 8 (held), 1000 and 40000 elements (on CUDA walked from memory: Welford's
    one-pass statistics) give exact statistics and normalized rows, bit for bit."""
    values = torch.tensor([0.1, -3.7, 10000.3, 123.456], device=device, dtype=dtype)
    x = values.unsqueeze(1).expand(4, n)
    if layout == "contiguous":
        x = x.contiguous()
    w, b = (torch.randn(n, device=device, dtype=dtype) for _ in range(2))
    text = EQUAL_ROWS[case].format(n=n)
    with fuser.enabled(True):
        got = run_optimized(script_from_source(text + "\n"), x, w, b)
        assert fuser.stats()["row_launches"] >= 1, fuser.stats()
    want = eager_from_source(text)(x, w, b)
    got, want = (r if isinstance(r, tuple) else (r,) for r in (got, want))
    if case == "group_norm":
        want = (b[:2].view(1, 2, 1).expand(4, 2, n // 2),)
    if case == "var_mean":
        want = (torch.zeros_like(want[0]), x[:, 0])
    if case == "batch_norm_train":  # the bias, and a tenth of the mean (momentum 0.1)
        want = (b[:4].view(1, 4, 1).expand(1, 4, n), x[:, 0] * 0.1)
    if case == "native_layer_norm":
        # Eager's CUDA mean can be an ulp off, and then its normalized rows and rstd are
        # too (rstd 302 where 1 / sqrt(eps) is 316 on 10000.3, rows of 1000).
        rstd = torch.tensor(1e-5, dtype=torch.float64, device=device).rsqrt().to(want[2].dtype)
        want = (b.expand(4, n), x[:, :1].to(want[1].dtype), rstd.expand_as(want[2]))
    for i, (g, e) in enumerate(zip(got, want, strict=True)):
        if case == "native_layer_norm" and i == 2:
            torch.testing.assert_close(g, e)  # a rounding step apart at most
            continue
        assert torch.equal(g, e), (case, i, (g.double() - e.double()).abs().max().item())


class RelativeBiasSoftmax(torch.nn.Module):
    """Swin V2's attention logits: a scale and a relative position bias, laid out as the
    permute of a [49, 49, heads] table, added before the softmax. Frozen, the bias is a
    constant whose rows (of 49) lie `heads` elements apart."""

    def __init__(self, heads: int) -> None:
        super().__init__()
        self.register_buffer("table", torch.randn(49 * 49, heads))
        self.register_buffer("scale", torch.full((1, heads, 1, 1), 2.0))

    def forward(self, attn: torch.Tensor) -> torch.Tensor:
        bias = self.table.view(49, 49, -1).permute(2, 0, 1).unsqueeze(0)
        return torch.softmax(attn * self.scale + bias, dim=-1)


@pytest.mark.parametrize("device", devices())
def test_a_constant_whose_rows_lie_apart_stays_out_of_the_row_group(device: str) -> None:
    module = RelativeBiasSoftmax(3).to(device).eval()
    attn = torch.randn(4, 3, 49, 49, device=device)
    fuser.reset_stats()
    with fuser.enabled(True), torch.no_grad():
        frozen = torch.jit.freeze(torch.jit.script(module))
        got = run_optimized(frozen, attn)
        want = module(attn)
    assert got.shape == want.shape and got.stride() == want.stride()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    # A row group holding the bias would meet rows apart and run interpreted every call.
    assert fuser.stats()["interpreted_runs"] == 0
