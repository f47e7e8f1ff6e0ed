"""One-pass variances (ReduceKind::SquaredDeviations, kernel_ir.h): where CUDA walks a
row from memory in every pass (rows too long to hold in registers, rows cut in slices,
columns), var, std, layer_norm and group_norm read the row once, each thread keeping
Welford's count, mean and squared deviations, combined across lanes, warps and slices
by Chan's formula. On CPU the rows take two passes as before; with FUSER_CROSS_COMPILE
the CUDA form, one-pass, is compiled too (`one_pass_variance_kernels` counts both).
Statistics of one tensor (a mean beside a variance) share one group (partition.cpp's
sibling merge), so that the kernel reads the tensor once."""

from __future__ import annotations

import os

import pytest
import torch
from test_reductions import compare, fn_of, subgraph_kinds

import fuser
from helpers import devices, run_optimized, script_from_source

# Rows of 40000 elements: longer than a CUDA row held in registers (32 elements a lane,
# 1024 lanes), so every pass walks the row from memory.
LONG = 40000

CASES = {
    "var": fn_of("return (x + 3.0).var(-1, keepdim=True) * 0.5"),
    "std_biased": fn_of("return torch.std(x * 2.0, [-1], correction=0, keepdim=True) + x"),
    "var_and_mean": fn_of(
        "y = x - 1.0", "return y.var(-1, keepdim=True), y.mean(-1, keepdim=True) + 1.0"
    ),
    "layer_norm": fn_of(f"return torch.layer_norm(x * 2.0, [{LONG}], None, None, 1e-5) + 1.0"),
    "var_mean": fn_of("v, m = torch.var_mean(x * 2.0, [-1], keepdim=True)", "return v, m + 1.0"),
    "columns": fn_of("return (x * 2.0).var(0) + 1.0"),
    "channels": fn_of("y = x - 0.5", "return y.var([0, 2], False), y.mean([0, 2])"),
}
SHAPES = {"columns": (LONG, 4), "channels": (8, 5, LONG // 8)}


def one_pass_kernels_built(device: str) -> bool:
    return device == "cuda" or os.environ.get("FUSER_CROSS_COMPILE") is not None


def check_one_pass(device: str) -> None:
    stats = fuser.stats()
    assert stats["row_launches"] >= 1 and stats["interpreted_runs"] == 0, stats
    assert stats["cuda_cross_compile_failures"] == 0, stats
    if one_pass_kernels_built(device):
        assert stats["one_pass_variance_kernels"] >= 1, stats


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16], ids=str)
@pytest.mark.parametrize("case", sorted(CASES))
def test_variances_of_rows_walked_from_memory(case: str, dtype: torch.dtype, device: str) -> None:
    x = torch.randn(SHAPES.get(case, (3, LONG)), device=device).to(dtype)
    with fuser.enabled(True):
        compare(CASES[case], x, dtype=dtype)
    check_one_pass(device)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("where", ["rows", "columns"])
def test_a_far_mean_loses_nothing(device: str, where: str) -> None:
    """Values 1e4 away from zero with a spread of 1: a variance from the sums of x and
    x^2 would cancel away most of its digits; the one-pass variance is as close to the
    float64 variance as eager's (a rounding step of slack)."""
    torch.manual_seed(0)
    shape = (3, LONG) if where == "rows" else (LONG, 3)
    dim = -1 if where == "rows" else 0
    x = torch.randn(shape, device=device) + 1e4
    fn = script_from_source(f"def f(x):\n    return (x * 1.0).var({dim})\n")
    with fuser.enabled(True):
        got = run_optimized(fn, x)
    exact = x.double().var(dim)
    eager_error = ((x.var(dim).double() - exact) / exact).abs().max().item()
    fused_error = ((got.double() - exact) / exact).abs().max().item()
    assert fused_error <= 2 * eager_error + 1e-4, (fused_error, eager_error)
    check_one_pass(device)


@pytest.mark.parametrize("device", devices())
def test_empty_and_constant_rows(device: str) -> None:
    """A row of equal values has no deviation (not a rounding residue); rows of one
    element divide by zero as eager does (nan for the unbiased variance)."""
    text = fn_of("y = x * 1.0", "return y.var(-1), torch.var(y, [-1], correction=0)")
    with fuser.enabled(True):
        compare(text, torch.full((2, LONG), 0.1, device=device))
        compare(text, torch.randn(4, 1, device=device))
    assert fuser.stats()["interpreted_runs"] == 0


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dims", ["-1", "0", "[0, 2]"])
def test_statistics_of_one_tensor_share_a_group(device: str, dims: str) -> None:
    """mean, var and std of one tensor over the same dims, none reading another: the
    partition joins the siblings, so one kernel reads x once for all three."""
    text = fn_of(
        f"return x.mean({dims}, keepdim=True), x.var({dims}, keepdim=True), "
        f"torch.std(x, {dims}, correction=0, keepdim=True)"
    )
    x = torch.randn(6, 300, 5, device=device)
    with fuser.enabled(True):
        fn = compare(text, x)
        assert fuser.stats()["groups_formed"] == 1
    assert {"aten::mean", "aten::var", "aten::std"} <= subgraph_kinds(fn, x)
