"""Fusible ops beside an `if` run inside its branches (passes/into_branches.cpp), where
they join the branch's groups: an optional attention mask added inside `if mask is not
None` and the softmax after it, Swin's shifted-window mask added inside `if shift > 0`
between its bias add and softmax. tests/cpp/test_into_branches checks which ops move."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import fuser
from helpers import all_nodes, devices, run_optimized, script_from_source

FUSION_GROUP = "fuser::FusionGroup"


def groups_of(graph: torch._C.Graph) -> list[set[str]]:
    return [
        {inner.kind() for inner in node.g("Subgraph").nodes()}
        for node in all_nodes(graph)
        if node.kind() == FUSION_GROUP
    ]


def masked_scores(scores: torch.Tensor, mask: torch.Tensor | None, scale: float) -> torch.Tensor:
    scores = scores * scale
    if mask is not None:
        scores = scores + mask
    return torch.softmax(scores, -1)


class ShiftedWindows(torch.nn.Module):
    """torchvision's window attention scores: the bias added, the mask added inside
    `if shift > 0` across a view, the softmax after the `if`."""

    def __init__(self, heads: int = 3, n: int = 16, windows: int = 4) -> None:
        super().__init__()
        self.heads, self.n, self.windows = heads, n, windows
        self.bias = torch.nn.Parameter(torch.randn(1, heads, n, n))
        self.register_buffer("mask", torch.where(torch.rand(windows, n, n) > 0.2, 0.0, -100.0))

    def forward(self, scores: torch.Tensor, shift: int) -> torch.Tensor:
        attn = scores + self.bias
        if shift > 0:
            windows = scores.size(0) // self.windows
            attn = attn.view(windows, self.windows, self.heads, self.n, self.n)
            attn = attn + self.mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.heads, self.n, self.n)
        return F.softmax(attn, dim=-1)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("with_mask", [True, False])
def test_an_optional_mask_and_the_softmax_after_it_are_one_group(
    device: str, with_mask: bool
) -> None:
    torch.manual_seed(0)
    scores = torch.randn(2, 4, 8, 8, device=device)
    mask = torch.randn(2, 1, 1, 8, device=device) if with_mask else None
    fn = torch.jit.script(masked_scores)
    with torch.no_grad(), fuser.enabled(True):
        got = run_optimized(fn, scores, mask, 0.125)
        groups = groups_of(torch.jit.last_executed_optimized_graph())
    want = masked_scores(scores, mask, 0.125)
    torch.testing.assert_close(got, want)
    assert got.stride() == want.stride()
    joined = {"aten::mul", "aten::softmax"} | ({"aten::add"} if with_mask else set())
    assert any(joined <= group for group in groups), groups


@pytest.mark.parametrize("device", devices())
def test_shifted_window_adds_and_softmax_are_one_group_in_each_branch(device: str) -> None:
    torch.manual_seed(0)
    module = ShiftedWindows().to(device).eval()
    scripted = torch.jit.freeze(torch.jit.script(module))
    scores = torch.randn(8, 3, 16, 16, device=device)
    with torch.no_grad(), fuser.enabled(True):
        for shift in (3, 0):
            got = run_optimized(scripted, scores, shift)
            want = module(scores, shift)
            torch.testing.assert_close(got, want)
            assert got.stride() == want.stride()
        groups = groups_of(torch.jit.last_executed_optimized_graph())
    two_adds = [g for g in groups if "aten::softmax" in g and "aten::add" in g]
    assert two_adds, groups
    assert all("aten::softmax" not in g or "aten::add" in g for g in groups), groups


# `x - y` raises for bool tensors; the branch taken reads it only in dead code. Moved into
# the branches, it would vanish there with the dead code, and with it the error.
DEAD_IN_ONE_BRANCH = """
def f(x, y, flag: bool):
    d = x - y
    if flag:
        r = d * 2
    else:
        unused = x / d
        r = x * x
    return r
"""


@pytest.mark.parametrize("device", devices())
def test_an_op_that_one_branch_reads_only_in_dead_code_stays_and_raises(device: str) -> None:

    fused = script_from_source(DEAD_IN_ONE_BRANCH)
    x, y = (torch.randn(3, 4, device=device) for _ in range(2))
    with fuser.enabled(True):
        for _ in range(3):
            torch.testing.assert_close(fused(x, y, False), x * x)
        bools = (x > 0, y > 0)
        with pytest.raises(RuntimeError, match="Subtraction"):
            fused(*bools, False)


# A write between the op and the `if` (or after it), and an assert after it: nothing
# moves across them (order_barriers.h), so each op reads what it read and each error
# comes first where it came first.
ACROSS_WRITES = """
def f(x, z, y, c: bool):
    p = x * 2
    x.add_(1)
    if c:
        r = p + 1
    else:
        r = p - 1
    z.add_(1)
    assert y.size(0) == 4, "y must have 4 rows"
    return r + z + y
"""


@pytest.mark.parametrize("device", devices())
def test_no_op_moves_across_a_write_or_an_assert(device: str) -> None:
    fused = script_from_source(ACROSS_WRITES)
    reference = script_from_source(ACROSS_WRITES)

    def inputs(rows: int) -> tuple[torch.Tensor, ...]:
        return (
            torch.ones(4, device=device),
            torch.ones(4, device=device),
            torch.ones(rows, device=device),
        )

    with fuser.enabled(True):
        for _ in range(3):
            got = fused(*inputs(4), True)
        with pytest.raises(torch.jit.Error, match="y must have 4 rows"):
            fused(*inputs(3), False)
    want = reference(*inputs(4), True)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
