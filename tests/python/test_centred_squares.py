"""A variance written out, the mean of (x - mean(x)) squared, reads its rows once more
after their mean. CUDA kernels that walk their rows from memory (columns, rows too long
to hold, rows cut in slices) take it in the mean's walk as Welford's squared
deviations (codegen/centred_squares.h): a walk fewer, values eager's within its
tolerance. Float and double programs only: a 16-bit program rounds each difference and
square as eager does."""

from __future__ import annotations

import os
import re

import pytest
import torch
from test_reductions import compare, fn_of

import fuser

CUDA_FORMS = torch.cuda.is_available() or os.environ.get("FUSER_CROSS_COMPILE") is not None
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

# ConvNeXt's channels-first LayerNorm (columns over NCHW's channels), the same over the
# last dim (rows), and one with (u - x) * (u - x) written twice.
CASES = {
    "channels": (
        fn_of(
            "u = x.mean(1, keepdim=True)",
            "s = (x - u).pow(2).mean(1, keepdim=True)",
            "return (x - u) / torch.sqrt(s + 1e-6)",
        ),
        (8, 96, 20, 24),
    ),
    "long_rows": (
        fn_of(
            "u = x.mean(-1, keepdim=True)",
            "s = ((u - x) * (u - x)).mean(-1, keepdim=True)",
            "return (x - u) * torch.rsqrt(s + 1e-5), s",
        ),
        (6, 40000),
    ),
}


@pytest.mark.skipif(not CUDA_FORMS, reason="needs CUDA, or FUSER_CROSS_COMPILE")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16], ids=str)
@pytest.mark.parametrize("case", sorted(CASES))
def test_written_out_variance_walks_once_before_its_stores(case: str, dtype: torch.dtype) -> None:
    text, shape = CASES[case]
    x = (torch.randn(shape, device=DEVICE) * 3.0 + 5.0).to(dtype)
    before = len(fuser.kernel_sources())
    with fuser.enabled(True):
        compare(text, x, dtype=dtype, case="sum" if dtype == torch.float32 else "")
    stats = fuser.stats()
    assert stats["interpreted_runs"] == 0 and stats["cuda_cross_compile_failures"] == 0, stats
    cuda = [s for s in fuser.kernel_sources()[before:] if "__global__" in s]
    assert cuda, "no CUDA form was built"
    # Welford's triple accumulates the squares in the walk that sums the mean (or in a
    # slice's walk); a 16-bit program keeps its two sums.
    folded = [s for s in cuda if re.search(r"fx_welford_add\(fx_\w+", s)]
    assert bool(folded) == (dtype != torch.float16), (case, dtype, len(cuda))
