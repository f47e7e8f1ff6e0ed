"""CUDA reshapes that ATen would copy copy their input in a group first
(passes/reshape_copies.cpp): attention's head merge keeps eager's values and strides,
leaves no ATen copy, and stays ATen's where a write could tell a copy from a view.
tests/cpp/test_reshape_copies checks which reshapes are rewritten."""

from __future__ import annotations

import pytest
import torch

import fuser
from helpers import count_kind, run_optimized, script_from_source, torchscript_alone

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

# The product's heads merged, then projected: every op but the copy is ATen's either way.
HEAD_MERGE = """
def f(attn, v, w):
    x = torch.matmul(attn, v).transpose(1, 2)
    x = x.reshape(x.size(0), x.size(1), -1)
    return torch.nn.functional.linear(x, w)
"""

WRITTEN = """
def f(q, w):
    x = q.transpose(1, 2).reshape(q.size(0), q.size(2), -1)
    x.mul_(2.0)
    return torch.nn.functional.linear(x, w) + q.sum()
"""


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_a_head_merge_copies_in_a_group(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    attn = torch.randn(4, 3, 49, 49, device="cuda", dtype=dtype).softmax(-1)
    v = torch.randn(4, 3, 49, 32, device="cuda", dtype=dtype)
    w = torch.randn(64, 96, device="cuda", dtype=dtype)
    reference, fused = script_from_source(HEAD_MERGE), script_from_source(HEAD_MERGE)
    with torch.no_grad():
        with torchscript_alone():
            want = run_optimized(reference, attn, v, w)
        with fuser.enabled(True):
            got = run_optimized(fused, attn, v, w)
            graph = torch.jit.last_executed_optimized_graph()
    groups = [n for n in graph.findAllNodes("fuser::FusionGroup")]
    copies = [g for g in groups if count_kind(g.g("Subgraph"), "aten::contiguous") == 1]
    assert copies, graph
    assert got.stride() == want.stride()
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    with fuser.enabled(True), torch.profiler.profile() as prof:
        fused(attn, v, w)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events()]
    assert not any("elementwise_kernel" in n for n in names), names


def test_a_reshape_written_afterwards_stays_atens() -> None:
    torch.manual_seed(0)
    q = torch.randn(2, 3, 5, 8, device="cuda")
    w = torch.randn(4, 24, device="cuda")
    reference, fused = script_from_source(WRITTEN), script_from_source(WRITTEN)
    with torch.no_grad():
        with torchscript_alone():
            want = run_optimized(reference, q, w)
        with fuser.enabled(True):
            got = run_optimized(fused, q, w)
            graph = torch.jit.last_executed_optimized_graph()
    assert count_kind(graph, "aten::contiguous") == 0
    torch.testing.assert_close(got, want, rtol=0, atol=0)
