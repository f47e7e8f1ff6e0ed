"""Rows cut in slices (codegen/split_rows.h, runtime/row_executor.h): a reducing group
whose rows are too few to fill the machine runs as one kernel per pass plus a storing
one, each over (row, slice) units, their partial results in one workspace per call laid
out by runtime/workspace_plan.h. FUSER_ROW_SPLITS (here `_set_row_splits`) forces the
cut: every reduction, dtype and output kind must then match eager as whole rows do."""

from __future__ import annotations

import os

import pytest
import torch
from test_one_pass_variance import check_one_pass
from test_reductions import CASES, DTYPES, compare

import fuser
from helpers import devices, eager_from_source, run_optimized, script_from_source


def stages_ran(stats: dict[str, int]) -> None:
    assert stats["staged_calls"] >= 1, stats
    assert stats["interpreted_runs"] == 0 and stats["cuda_cross_compile_failures"] == 0, stats
    assert 0 < stats["workspace_bytes"] <= stats["workspace_buffer_bytes"], stats


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("splits", [3], indirect=True)
def test_every_reduction_in_slices(case: str, dtype: torch.dtype, device: str, splits: int) -> None:
    # Rows of 41 * 37 elements in 3 slices, the last one shorter.
    x = torch.randn(6, 1, 41, 37, device=device).to(dtype)
    with fuser.enabled(True):
        compare(CASES[case], x, dtype=dtype, case=case)
    stages_ran(fuser.stats())


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("splits", [2, 7, 64], indirect=True)
def test_slices_of_every_length(device: str, splits: int) -> None:
    """Rows of 10 elements in 7 slices leave the last ones empty; 64 slices of a row of
    10 give slices of one element."""
    for row in [10, 1000]:
        x = torch.randn(4, row, device=device)
        with fuser.enabled(True):
            compare(CASES["softmax"], x)
            compare(CASES["std"], x)
        stages_ran(fuser.stats())


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("splits", [4], indirect=True)
def test_nan_and_inf_in_one_slice_reach_the_row(device: str, splits: int) -> None:
    x = torch.randn(5, 400, device=device)
    x[1, 390] = float("nan")
    x[2, :] = float("-inf")
    x[3, 4] = float("inf")
    for case in ["amax", "softmax", "log_softmax", "sum", "amin_dropped"]:
        with fuser.enabled(True):
            compare(CASES[case], x)
    stages_ran(fuser.stats())


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("splits", [2, 3, 7, 200], indirect=True)
def test_group_norm_and_layer_norm_in_slices(device: str, splits: int) -> None:
    """group_norm's rows span two dims (a group's channels, read per channel, and the
    pixels): slices start and end inside a channel's run, span several, or hold one
    element; layer_norm reads its weight and bias along the row; a column variance's
    slices too. On CUDA the variances take one pass, their slices' Welford partials
    meeting in the next stage (test_one_pass_variance.py)."""
    text = (
        "def f(x, w, b, y, lw, lb):\n"
        "    g = torch.nn.functional.silu(torch.group_norm(x, 4, w, b, 1e-5))\n"
        "    return g, torch.layer_norm(y * 2.0, [300], lw, lb, 1e-5) + 1.0, (y + 1.0).var(0)\n"
    )
    x = torch.randn(2, 8, 9, 7, device=device)
    w, b = torch.randn(8, device=device), torch.randn(8, device=device)
    y = torch.randn(3, 300, device=device)
    lw, lb = torch.randn(300, device=device), torch.randn(300, device=device)
    with fuser.enabled(True):
        compare(text, x, w, b, y, lw, lb)
    stages_ran(fuser.stats())
    check_one_pass(device)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("splits", [5], indirect=True)
def test_training_layer_norm_in_slices(device: str, splits: int) -> None:
    """Autodiff's native_layer_norm forward (its per-row mean and rstd stored by the
    first slice) and the gradients match eager's."""
    text = (
        "def f(x, w, b):\n"
        "    return torch.nn.functional.gelu(torch.layer_norm(x + 1.0, [512], w, b, 1e-5))\n"
    )
    fn = script_from_source(text + "\n")
    eager = eager_from_source(text)
    args = [torch.randn(shape, device=device) for shape in [(3, 512), (512,), (512,)]]
    grads = torch.randn(3, 512, device=device)
    with fuser.enabled(True):
        for _ in range(4):
            leaves = [a.clone().requires_grad_() for a in args]
            fn(*leaves).backward(grads)
    ref = [a.clone().requires_grad_() for a in args]
    eager(*ref).backward(grads)
    for got, want in zip(leaves, ref, strict=True):
        torch.testing.assert_close(got.grad, want.grad)
    assert fuser.stats()["staged_calls"] >= 1


@pytest.mark.parametrize("device", devices())
def test_slices_draw_the_masks_whole_rows_draw(device: str) -> None:
    """Dropout after softmax draws by element index: under one seed, the staged kernels
    keep the elements the whole-row kernel keeps (their values differ by the rounding of
    sums added in another order)."""
    text = "def f(x):\n    return torch.dropout(torch.softmax(x * 2.0, -1), 0.3, True)\n"
    x = torch.randn(4, 2000, device=device)
    results = []
    for s in [1, 3]:
        fuser._C._set_row_splits(s)
        try:
            fn = script_from_source(text + "\n")
            with fuser.enabled(True), torch.no_grad():
                run_optimized(fn, x)
                torch.manual_seed(7)
                results.append(fn(x))
        finally:
            fuser._C._set_row_splits(0)
    assert fuser.stats()["staged_calls"] >= 1
    assert torch.equal(results[0] != 0, results[1] != 0)
    torch.testing.assert_close(results[0], results[1])
    kept = (results[0] != 0).float().mean().item()
    assert 0.65 < kept < 0.75, kept


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("splits", [3], indirect=True)
def test_later_passes_reuse_the_workspace(device: str, splits: int) -> None:
    """Five passes (softmax's maximum and sum, the mean, std's own mean and its sum of
    squares; on CUDA four: std's mean and squared deviations take one pass) and a
    storing stage: the maximum's partials are dead once the sum's stage combined them,
    and a later pass's partials take their place; softmax alone (two passes) reuses
    nothing."""
    text = (
        "def f(x):\n"
        "    y = torch.softmax(x, -1)\n"
        "    z = y - y.mean(-1, keepdim=True)\n"
        "    return z / z.std(-1, keepdim=True)\n"
    )
    x = torch.randn(3, 777, device=device)
    with fuser.enabled(True):
        compare(text, x)
        stats = fuser.stats()
        stages = 5 if device == "cuda" else 6
        assert stats["row_launches"] == stages * stats["staged_calls"], stats
        assert stats["workspace_bytes"] < stats["workspace_buffer_bytes"], stats
        fuser.reset_stats()
        compare(CASES["softmax"], x)
        stats = fuser.stats()
        assert stats["row_launches"] == 3 * stats["staged_calls"], stats
        assert stats["workspace_bytes"] == stats["workspace_buffer_bytes"], stats


def test_one_row_is_cut_across_the_threads(variant_flags: None) -> None:
    """Without forcing: a whole-tensor reduction (one row) on a CPU of several threads
    is cut in slices (timed against whole rows at first run, each variant correct)."""
    if torch.get_num_threads() < 2:
        pytest.skip("one CPU thread: one row fills the machine")
    x = torch.randn(512, 1024)
    with fuser.enabled(True):
        compare("def f(x):\n    return (x * x).mean([0, 1]) + 1.0", x, case="sum")
        compare(CASES["softmax"], x.reshape(1, -1))
    assert fuser.stats()["workspace_bytes"] > 0
    names = [r["names"] for r in fuser._C.variant_log()]
    assert any(n[0].startswith("slices=") for n in names), names


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("splits", [1], indirect=True)
def test_one_long_whole_row_sums_as_accurately_as_eager(device: str, splits: int) -> None:
    """Rows never cut: one row of 2^24 elements, each CUDA lane adding some 16000 of
    them (a float accumulator put such a mean 7e-6 away from eager's)."""
    x = torch.randn(4096, 4096, device=device)
    with fuser.enabled(True):
        compare("def f(x):\n    return (x * x).mean()", x)
        compare("def f(x):\n    return (x - 0.5).sum([0, 1], keepdim=True) * 0.5", x, case="sum")
    stats = fuser.stats()
    assert stats["row_launches"] >= 4 and stats["staged_calls"] == 0, stats


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("splits", [3], indirect=True)
def test_integer_sums_in_slices(device: str, splits: int) -> None:
    """Sums of integers and bools are int64 in every slice's partial, exact as eager's."""
    # Row sums past int32 (1999 x at least 2^21), products within it.
    x = torch.randint(2**20, 2**21, (5, 1999), device=device, dtype=torch.int32)
    with fuser.enabled(True):
        compare("def f(x):\n    return (x * 2).sum(-1)", x)
        compare("def f(x):\n    return (x > 0).sum(-1, keepdim=True) + 1", x)
    stages_ran(fuser.stats())


@pytest.mark.skipif(
    not torch.cuda.is_available() and os.environ.get("FUSER_CROSS_COMPILE") is None,
    reason="needs CUDA, or FUSER_CROSS_COMPILE for the CUDA forms of CPU kernels",
)
@pytest.mark.parametrize("splits", [4], indirect=True)
def test_cuda_slice_walks_take_two_vectors_a_lane(splits: int) -> None:
    """A CUDA walk along a row or a slice in vectors is unrolled by 2, so that a lane has
    the second vector's loads in flight during the first's arithmetic (GroupNorm + SiLU
    at batch 1 on the H100: 23.7 us of device time, 19.8 with it). Values as eager's."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.randn(1, 32, 24, 40, device=device)
    w, b = torch.randn(32, device=device), torch.randn(32, device=device)
    source = (
        "def f(x, w, b):\n    return torch.nn.functional.silu(torch.group_norm(x, 4, w, b, 1e-5))\n"
    )
    before = len(fuser.kernel_sources())
    with fuser.enabled(True):
        got = run_optimized(script_from_source(source), x, w, b)
    want = eager_from_source(source)(x, w, b)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    stages_ran(fuser.stats())
    walks = [
        s for s in fuser.kernel_sources()[before:] if "__global__" in s and "fx_b < fx_hi" in s
    ]
    assert walks
    for s in walks:
        loops = s.count("for (int64_t fx_b = fx_lo")
        assert loops and s.count("#pragma unroll 2\n  for (int64_t fx_b = fx_lo") == loops
