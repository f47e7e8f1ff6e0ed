"""Autodiff's gradient sums laid out as they run (csrc/passes/gradient_sums.cpp).

A value used twice gets two gradients, which autodiff's backward graph sums. Profiling
runs that sum as the interpreter's prim::AutogradAdd, which lays a transposed gradient
plus a row-major one out row-major; the optimized graph's `aten::add` (ATen's or ours)
lays it out transposed. Row groups formed over the profiled layout then met rows apart
in memory at every call and ran interpreted (found by tools/fuzz_training.py, seed
105). The backward must run every group it forms as a kernel, with eager's values."""

from __future__ import annotations

import pytest
import torch
from test_random_training import difference_from_eager

import fuser
from helpers import devices

# x is read twice (centred, and scaled): its gradient is a sum of a transposed term
# and a row-major one; the normalization's backward sums that along rows.
SOURCE = """
def f(x, p):
    v = x - x.mean(-1, keepdim=True)
    w = x / (p * p + 1.0)
    u = w + v
    return ((u - u.mean(-1, keepdim=True)) / torch.sqrt(u.var(-1, keepdim=True) + 1e-5),)
"""


@pytest.mark.parametrize("device", devices())
def test_a_transposed_inputs_gradient_sum_runs_fused(device: str) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 6, generator=g).t().to(device)  # (6, 8), strides (1, 6)
    p = (torch.randn(8, generator=g) + 1.0).to(device)
    with fuser.enabled(True):
        why = difference_from_eager(SOURCE, [x, p], seed=1)
        stats = fuser.stats()
    assert why is None, why
    assert stats["groups_formed"] >= 2  # forward and backward groups
    assert stats["interpreted_runs"] == 0


# x0 is read twice (silu, and a dropout that keeps every element), the sum's rows are
# averaged, normalized and returned. Profiling lays the sum of the mean's gradient (a
# row-major broadcast) and the sigmoid's (transposed, as x0) out as `b + a`, transposed;
# the optimized graph lays it out row-major, and so x0's gradient, which dropout's
# backward computes from it with a transposed mask. That backward's layout is
# TensorIterator's with the mask copied to float first (CPU); before the pass replayed
# it (fuzz_training seed 712, --strict-layouts), x0's gradient came out transposed.
DROPOUT_SOURCE = """
def f(x0, p0, p1):
    v0 = torch.nn.functional.silu(x0)
    v1 = torch.dropout(x0, 0.0, True) + v0
    v1r = v1.mean(-1, keepdim=True)
    v2 = torch.sigmoid(v1)
    v4 = torch.layer_norm(v2, [12], p1, p0, 1e-5)
    return (v1r, v2, v4)
"""


def test_a_dropout_backward_of_a_relaid_sum_has_the_runs_strides() -> None:
    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(5, 2, 12, generator=g).transpose(0, 1)  # (2, 5, 12), strides (12, 24, 1)
    p0, p1 = torch.randn(12, generator=g) + 1.0, torch.randn(12, generator=g) + 1.0
    with fuser.enabled(True):
        why = difference_from_eager(DROPOUT_SOURCE, [x0, p0, p1], seed=1, strict_layouts=True)
        stats = fuser.stats()
    assert why is None, why
    assert stats["groups_formed"] >= 2
    assert stats["interpreted_runs"] == 0
