"""Attention masks that CUDA's fused attention kernels refuse for their layout (a last
dim of stride 0: a traced transformers model's expanded all-true mask) are copied dense
first (passes/attention_masks.cpp), so scaled_dot_product_attention runs a fused kernel
instead of its math path; one copy serves every layer. TorchScript profiles no input of
attention, so the mask's layout is mostly unknown to the graph: the copy is then decided
per call (fuser::dense_attention_mask). The results are those of the same attention with
a dense mask. tests/cpp/test_attention_masks
checks the decision on CUDA-typed graphs without a GPU."""

from __future__ import annotations

import pytest
import torch

import fuser
from helpers import FUSION_GROUP, all_nodes, run_optimized, script_from_source

# Two layers of attention over one mask, broadcast from one flag per batch entry as
# transformers' traced encoders broadcast theirs.
TWO_LAYERS = """
def f(q, k, v, keep):
    mask = keep.expand(q.size(0), 1, q.size(2), k.size(2))
    a = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return torch.nn.functional.scaled_dot_product_attention(a, k, v, attn_mask=mask)
"""

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="the masks are made dense for CUDA's kernels"
)


def mask_copies(graph: torch._C.Graph) -> list[torch._C.Node]:
    """The nodes that make a mask dense: a group of one contiguous(), or the per-call op."""
    return [
        n
        for n in all_nodes(graph)
        if n.kind() == "fuser::dense_attention_mask"
        or n.kind() == FUSION_GROUP
        and [i.kind() for i in n.g("Subgraph").nodes() if i.kind() != "prim::Constant"]
        == ["aten::contiguous"]
    ]


def attention_kernels(fn: object, *args: torch.Tensor) -> set[str]:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn(*args)  # type: ignore[operator]
        torch.cuda.synchronize()
    return {e.name for e in prof.events() if "_scaled_dot_product" in e.name}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_an_expanded_mask_reaches_a_fused_kernel_once_copied(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(4, 2, 64, 32, device="cuda", dtype=dtype) for _ in range(3))
    keep = torch.ones(4, 1, 1, 1, dtype=torch.bool, device="cuda")
    args = (q, k, v, keep)
    dense = keep.expand(4, 1, 64, 64).contiguous()
    expected = torch.nn.functional.scaled_dot_product_attention(
        torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=dense),
        k,
        v,
        attn_mask=dense,
    )
    with torch.no_grad(), fuser.enabled(False):
        plain = script_from_source(TWO_LAYERS)
        run_optimized(plain, *args)
        # TorchScript alone hands the expanded mask on: the math path.
        assert "aten::_scaled_dot_product_attention_math" in attention_kernels(plain, *args)
    with torch.no_grad(), fuser.enabled():
        fused = script_from_source(TWO_LAYERS)
        out = run_optimized(fused, *args)
        kernels = attention_kernels(fused, *args)
        graph = torch.jit.last_executed_optimized_graph()
    assert "aten::_scaled_dot_product_attention_math" not in kernels, kernels
    assert kernels, "no attention ran"
    tolerance = 1e-5 if dtype == torch.float32 else 2e-3
    torch.testing.assert_close(out, expected, rtol=tolerance, atol=tolerance)
    assert len(mask_copies(graph)) == 1, graph


def test_a_dense_mask_is_not_copied() -> None:
    q, k, v = (torch.randn(4, 2, 64, 32, device="cuda") for _ in range(3))
    mask = torch.rand(4, 1, 64, 64, device="cuda") > 0.2
    source = """
def f(q, k, v, mask):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
"""
    with torch.no_grad(), fuser.enabled():
        fused = script_from_source(source)
        out = run_optimized(fused, q, k, v, mask)
        graph = torch.jit.last_executed_optimized_graph()
    assert not any(n.kind() == "aten::contiguous" for n in all_nodes(graph))
    assert not any(n.kind() == FUSION_GROUP for n in all_nodes(graph))
    # Where the graph does not know its layout, the check per call hands it on as it is.
    for node in all_nodes(graph):
        if node.kind() == "fuser::dense_attention_mask":
            dense = torch.ops.fuser.dense_attention_mask(mask)
            assert dense.data_ptr() == mask.data_ptr() and dense.stride() == mask.stride()
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, expected)


def test_the_per_call_copy_copies_only_what_the_kernels_refuse() -> None:
    expanded = torch.ones(4, 1, 1, 1, dtype=torch.bool, device="cuda").expand(4, 1, 64, 64)
    dense = torch.ops.fuser.dense_attention_mask(expanded)
    assert dense.is_contiguous() and torch.equal(dense, expanded)
    keys = torch.ones(4, 1, 1, 64, dtype=torch.bool, device="cuda").expand(4, 1, 64, 64)
    assert torch.ops.fuser.dense_attention_mask(keys).data_ptr() == keys.data_ptr()
