"""Attention masks on the CPU: a boolean mask is stored as bytes in kernels
(codegen/expr_printer.cpp, storageTypeName), since GCC vectorizes no loop that loads a
`bool`, and fx_expf selects 0 below -104 rather than scaling into the subnormal range,
where each product takes a microcode assist. Before both, GPT-2's masked softmax ran
element by element and 2-4x slower than eager, and the GPT-2 block 30% slower fused
than TorchScript alone on two cores."""

from __future__ import annotations

import re

import pytest
import torch

import fuser
from helpers import (
    eager_from_source,
    host_compiler_is_gcc,
    missing_vector_types,
    run_fused,
    run_optimized,
    script_from_source,
)

# Constants of their own keep these kernels' text apart from other tests' (a source the
# process compiled before is found in memory and not listed again).
MASKED_SOFTMAX = (
    "def f(att, mask):\n"
    "    return torch.softmax((att * 0.1875).masked_fill(mask, float('-inf')), -1)\n"
)
MASKED_SCALE = (
    "def f(att, mask):\n"
    "    return torch.where(mask, att * 0.3125, att - 0.4375), mask & (att > 0)\n"
)


def causal_mask(t: int) -> torch.Tensor:
    return (torch.tril(torch.ones(t, t)) == 0).view(1, 1, t, t)


@pytest.mark.parametrize("t", [1, 7, 128, 300])
def test_causal_masked_softmax_matches_eager(t: int) -> None:
    att, mask = torch.randn(2, 3, t, t), causal_mask(t)
    got = run_fused(MASKED_SOFTMAX, att, mask)
    want = eager_from_source(MASKED_SOFTMAX)(att, mask)
    torch.testing.assert_close(got, want)
    assert got.stride() == want.stride()


def test_a_mask_selects_and_is_stored_as_eager() -> None:
    """A bool input read through where and a bool output: bytes of 0 and 1 both ways."""
    att, mask = torch.randn(4, 33, 65), torch.rand(4, 1, 65) < 0.5
    got = run_fused(MASKED_SCALE, att, mask)
    want = eager_from_source(MASKED_SCALE)(att, mask)
    assert torch.equal(got[0], want[0])
    assert got[1].dtype == torch.bool and torch.equal(got[1], want[1])
    assert got[1].view(torch.uint8).max() <= 1


def test_a_mask_of_bytes_past_one_reads_as_eager_reads_it() -> None:
    """A bool tensor viewed from bytes 0 to 3: eager reads every nonzero byte as true,
    and so does the byte load's cast."""
    att = torch.randn(4, 33, 65)
    mask = torch.randint(0, 4, (4, 1, 65), dtype=torch.uint8).view(torch.bool)
    got = run_fused(MASKED_SCALE.replace("0.3125", "0.65625"), att, mask)
    want = eager_from_source(MASKED_SCALE.replace("0.3125", "0.65625"))(att, mask)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


@pytest.mark.skipif(not host_compiler_is_gcc(), reason="reads GCC's -fopt-info reports")
def test_kernels_reading_a_mask_vectorize() -> None:
    before = len(fuser.kernel_sources())
    fn = script_from_source(MASKED_SOFTMAX.replace("0.1875", "0.15625"))
    with fuser.enabled(True), torch.no_grad():
        run_optimized(fn, torch.randn(1, 2, 64, 64), causal_mask(64))
    sources = [s for s in fuser.kernel_sources()[before:] if "__global__" not in s]
    assert sources, "no CPU kernel was compiled"
    for source in sources:
        assert re.search(r"const uint8_t\* __restrict__ in\d+ = \(const uint8_t\*\)", source)
        assert missing_vector_types(source) == []


def test_exp_below_its_range_is_zero_and_above_it_matches_eager() -> None:
    """fx_expf's select: -inf and everything below -104 give 0 (the bits of the scaled
    form it replaced, so only a benchmark sees the assist it avoids), the subnormal
    results above it, overflow and NaN as eager's."""
    x = torch.tensor(
        [float("-inf"), -1e30, -200.0, -104.5, -104.0, -103.97, -103.0, -95.0, -87.5, -87.0]
        + [0.0, 1.0, 88.5, 89.5, float("inf"), float("nan")]
    )
    got = run_fused("def f(x):\n    return torch.exp(x * 1.0) + 0.0\n", x)
    want = torch.exp(x)
    assert torch.equal(got[:4], torch.zeros(4))
    torch.testing.assert_close(got, want, rtol=2e-6, atol=0.0, equal_nan=True)
