"""A softmax over the last dim of a view runs before the view (passes/
softmax_before_views.cpp), joining the group that computes the viewed value: Swin's
window attention adds its relative position bias and its shifted-window mask around a
view of the scores, then takes the softmax of the sum viewed back; the two adds and the
softmax are one group. Bias adds move past such views where the bias broadcasts from
leading 1s (passes/adds_past_views.cpp). tests/cpp/test_softmax_before_views and
test_adds_past_views check which graphs are rewritten."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import fuser
from helpers import all_nodes, devices, eager_from_source, run_optimized, script_from_source

FUSION_GROUP = "fuser::FusionGroup"


class WindowAttention(torch.nn.Module):
    """torchvision's shifted-window attention, its scores to its output: `windows` windows
    per image of `n` tokens, `heads` heads."""

    def __init__(self, heads: int = 3, n: int = 49, windows: int = 4) -> None:
        super().__init__()
        self.heads, self.n, self.windows = heads, n, windows
        self.bias = torch.nn.Parameter(torch.randn(heads, n, n))
        self.register_buffer("mask", torch.where(torch.rand(windows, n, n) > 0.2, 0.0, -100.0))

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        attn = q.matmul(k.transpose(-2, -1))
        attn = attn + self.bias.unsqueeze(0)
        attn = attn.view(q.size(0) // self.windows, self.windows, self.heads, self.n, self.n)
        attn = attn + self.mask.unsqueeze(1).unsqueeze(0)
        attn = attn.view(-1, self.heads, self.n, self.n)
        return F.softmax(attn, dim=-1).matmul(v)


def groups_of(graph: torch._C.Graph) -> list[set[str]]:
    return [
        {inner.kind() for inner in node.g("Subgraph").nodes()}
        for node in all_nodes(graph)
        if node.kind() == FUSION_GROUP
    ]


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_window_attention_adds_and_softmax_are_one_group(device: str, dtype: torch.dtype) -> None:
    if dtype == torch.float16 and device == "cpu":
        pytest.skip("16-bit attention rows: CUDA")
    torch.manual_seed(0)
    module = WindowAttention().to(device, dtype).eval()
    q, k, v = (torch.randn(8, 3, 49, 32, device=device, dtype=dtype) for _ in range(3))
    scripted = torch.jit.freeze(torch.jit.script(module))
    with torch.no_grad(), fuser.enabled(True):
        want = module(q, k, v)
        for _ in range(3):
            got = scripted(q, k, v)
    tolerance = {"rtol": 2e-3, "atol": 2e-3} if dtype == torch.float16 else {}
    torch.testing.assert_close(got, want, **tolerance)
    assert got.stride() == want.stride()
    groups = groups_of(torch.jit.last_executed_optimized_graph())
    assert {"aten::add", "aten::softmax"} <= set().union(*groups), groups
    [softmax_group] = [g for g in groups if "aten::softmax" in g]
    assert "aten::add" in softmax_group, groups


# y spans every dim, so the add cannot move past the view; the log_softmax moves before.
FLAT_LOG_SOFTMAX = """
def f(x, y):
    return ((x + y).view(-1, x.size(-1))).log_softmax(-1)
"""

# A view that splits the last dim makes other rows: the softmax stays after it.
SPLIT_ROWS = """
def f(x, y):
    return torch.softmax((x + y).view(x.size(0), x.size(1), 2, -1), -1)
"""


@pytest.mark.parametrize("device", devices())
def test_softmax_before_views_only_where_the_rows_are_the_same(device: str) -> None:
    torch.manual_seed(1)
    x, y = (torch.randn(4, 6, 10, device=device) for _ in range(2))
    for source, joins in ((FLAT_LOG_SOFTMAX, True), (SPLIT_ROWS, False)):
        fn = script_from_source(source)
        with fuser.enabled(True):
            got = run_optimized(fn, x, y)
        want = eager_from_source(source)(x, y)
        torch.testing.assert_close(got, want)
        assert got.stride() == want.stride()
        groups = groups_of(torch.jit.last_executed_optimized_graph())
        rows = {"aten::softmax", "aten::log_softmax"}
        joined = any("aten::add" in g and g & rows for g in groups)
        assert joined == joins, (source, groups)
