"""A boolean attention mask read by several layers is converted to its additive form once
per call (passes/attention_masks_once.cpp), where scaled_dot_product_attention would
convert it in every layer; each layer is handed the converted mask only where attention
would have made exactly those values itself (flash or memory-efficient attention: 0 /
-inf; cuDNN attention: 0 / its own finite value; the query's dtype), so its result is
eager's, bit for bit. tests/cpp/test_attention_masks_once checks which graphs are
rewritten."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import fuser
from helpers import (
    count_kind,
    devices,
    eager_from_source,
    run_optimized,
    script_from_source,
)

TWO_LAYERS = """
def f(q, k, v, mask):
    a = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return torch.nn.functional.scaled_dot_product_attention(a, k, v, attn_mask=mask)
"""

# The second layer in float64: the mask converted for the first (float32) does not fit it.
SECOND_LAYER_IN_DOUBLE = """
def f(q, k, v, mask):
    a = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return torch.nn.functional.scaled_dot_product_attention(
        a.double(), k.double(), v.double(), attn_mask=mask)
"""


def attention_inputs(device: str, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 32, 16, device=device, dtype=dtype) for _ in range(3))
    mask = torch.rand(2, 1, 32, 32, device=device) > 0.3
    mask[0, 0, 5] = False  # a query that may attend to nothing
    mask[1, 0, :, 7] = False  # a key nobody attends to
    return q, k, v, mask


def conversions(fn: object, *args: torch.Tensor) -> tuple[int, int]:
    """The mask conversions (aten::where) of one call of `fn`: those attention makes
    itself, and those before it (the one per call this pass adds)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn(*args)  # type: ignore[operator]
    wheres = [e for e in prof.events() if e.name == "aten::where"]
    by_attention = sum(
        1
        for e in wheres
        if e.cpu_parent and e.cpu_parent.name == "aten::scaled_dot_product_attention"
    )
    before = sum(1 for e in wheres if not (e.cpu_parent and e.cpu_parent.name.startswith("aten::")))
    return by_attention, before


FLASH, EFFICIENT, CUDNN = 1, 2, 3  # SDPBackend's values, as _fused_sdp_choice gives them


def converts_once(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> bool:
    """Whether attention picks a backend that converts the boolean mask to an additive one
    (flash or memory-efficient attention: 0 / -inf; cuDNN: 0 / -65504); the math path
    handles the boolean mask its own way, and no conversion is made for it."""
    return torch._fused_sdp_choice(q, k, v, mask) in (FLASH, EFFICIENT, CUDNN)


def fused_and_eager(source: str, args: tuple[torch.Tensor, ...]) -> tuple[object, object]:
    with fuser.enabled():
        fused = script_from_source(source)
        run_optimized(fused, *args)
    return fused, eager_from_source(source)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_a_boolean_mask_is_converted_once_for_every_layer(device: str, dtype: torch.dtype) -> None:
    if dtype == torch.float16 and device == "cpu":
        pytest.skip("float16 attention is a CUDA case")
    args = attention_inputs(device, dtype)
    with torch.no_grad():
        fused, eager = fused_and_eager(TWO_LAYERS, args)
        with fuser.enabled():
            got = fused(*args)  # type: ignore[operator]
            graph = torch.jit.last_executed_optimized_graph()
            fused_conversions = conversions(fused, *args)
        want = eager(*args)  # type: ignore[operator]
        eager_conversions = conversions(eager, *args)
    assert count_kind(graph, "fuser::additive_attention_mask") == 1, graph
    assert count_kind(graph, "fuser::scaled_dot_product_attention") == 2, graph
    assert count_kind(graph, "aten::scaled_dot_product_attention") == 0, graph
    assert eager_conversions == (2, 0)  # attention converts the boolean mask in each layer
    assert converts_once(*args)  # flash or memory-efficient attention, cuDNN in float16
    assert fused_conversions == (0, 1)
    assert got.dtype == want.dtype and got.stride() == want.stride()
    assert torch.equal(got, want)


CUDA_16BIT = [torch.float16, torch.bfloat16]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="cuDNN attention is a CUDA backend")
@pytest.mark.parametrize("dtype", CUDA_16BIT)
@pytest.mark.parametrize("backend", [SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION])
def test_each_backend_gets_its_own_conversion_once(dtype: torch.dtype, backend: SDPBackend) -> None:
    """cuDNN attention converts a boolean mask with a finite value where false, the other
    backends with -inf: the conversion made once is the one the layers' backend makes,
    checked on rows that attend to nothing, where the value decides the result."""
    args = attention_inputs("cuda", dtype)
    with torch.no_grad(), sdpa_kernel(backend):
        if torch._fused_sdp_choice(*args) != int(backend):
            pytest.skip(f"{backend} does not take these inputs on this GPU")
        fused, eager = fused_and_eager(TWO_LAYERS, args)
        with fuser.enabled():
            got = fused(*args)  # type: ignore[operator]
            fused_conversions = conversions(fused, *args)
        want = eager(*args)  # type: ignore[operator]
    assert fused_conversions == (0, 1)
    assert torch.equal(got, want)


@pytest.mark.parametrize("device", devices())
def test_the_math_path_gets_the_boolean_mask(device: str) -> None:
    args = attention_inputs(device)
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
        fused, eager = fused_and_eager(TWO_LAYERS, args)
        with fuser.enabled():
            got = fused(*args)  # type: ignore[operator]
            fused_conversions = conversions(fused, *args)
        want = eager(*args)  # type: ignore[operator]
    # The math path is handed the boolean mask in each layer, as in eager, and nothing is
    # converted before the layers.
    assert fused_conversions[1] == 0
    assert torch.equal(got, want)


@pytest.mark.parametrize("device", devices())
def test_a_layer_of_another_dtype_gets_the_boolean_mask(device: str) -> None:
    args = attention_inputs(device)
    with torch.no_grad():
        fused, eager = fused_and_eager(SECOND_LAYER_IN_DOUBLE, args)
        with fuser.enabled():
            got = fused(*args)  # type: ignore[operator]
            fused_conversions = conversions(fused, *args)
        want = eager(*args)  # type: ignore[operator]
    # The float64 layer converts the boolean mask itself, whatever its backend; the float32
    # layer takes the converted one where its backend would make the same.
    once = converts_once(*args)
    assert fused_conversions == (int(not once) + 1, int(once))
    assert got.dtype == torch.float64 and torch.equal(got, want)


def test_gradients_through_the_shared_mask_op_are_eagers() -> None:
    # TorchScript hands a custom pass only autodiff's subgraphs of a graph that records
    # gradients, and attention is in none: the op is called directly here.
    q, k, v, mask = attention_inputs("cpu")
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    additive, form = torch.ops.fuser.additive_attention_mask(mask, q, k, v, 0.0, False, None, False)
    assert form != 0 and additive.dtype == q.dtype  # converted: the test would not see the op
    got = torch.ops.fuser.scaled_dot_product_attention(
        *leaves, mask, additive, form, 0.0, False, None, False
    )
    want = torch.nn.functional.scaled_dot_product_attention(*leaves, attn_mask=mask)
    assert torch.equal(got, want)
    got_grads = torch.autograd.grad(got.sum(), leaves)
    want_grads = torch.autograd.grad(want.sum(), leaves)
    for g, w in zip(got_grads, want_grads, strict=True):
        assert torch.equal(g, w)


def test_a_float_mask_is_handed_on_as_it_is() -> None:
    q, k, v, mask = attention_inputs("cpu")
    additive = torch.zeros(mask.shape).masked_fill(~mask, -1e4)
    with torch.no_grad():
        fused, eager = fused_and_eager(TWO_LAYERS, (q, k, v, additive))
        with fuser.enabled():
            got = fused(q, k, v, additive)  # type: ignore[operator]
            fused_conversions = conversions(fused, q, k, v, additive)
    # The graph does not know the mask's dtype (TorchScript profiles no input of
    # attention); the conversion before the layers passes a float mask through.
    assert fused_conversions == (0, 0)
    assert torch.equal(got, eager(q, k, v, additive))  # type: ignore[operator]


def convert(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> tuple:
    return torch.ops.fuser.additive_attention_mask(mask, q, k, v, 0.0, False, None, False)


@pytest.mark.parametrize(
    "device,dtype",
    [(d, torch.float32) for d in devices()]
    + [("cuda", t) for t in CUDA_16BIT if "cuda" in devices()],
)
def test_the_conversion_is_the_one_attention_makes(device: str, dtype: torch.dtype) -> None:
    args = attention_inputs(device, dtype)
    mask = args[3]
    additive, form = convert(*args)
    backend = torch._fused_sdp_choice(*args)
    false_value = {FLASH: float("-inf"), EFFICIENT: float("-inf"), CUDNN: -65504.0}.get(backend)
    if false_value is None:  # the math path: the boolean mask itself
        assert form == 0 and additive is mask
        return
    assert form != 0
    assert additive.dtype == dtype and additive.shape == mask.shape
    assert additive.device == mask.device
    assert bool((additive[mask] == 0).all())
    assert bool((additive[~mask] == torch.tensor(false_value, dtype=dtype)).all())
    floats = torch.randn(mask.shape, device=device)
    floats_back, floats_form = convert(*args[:3], floats)
    assert floats_form == 0 and floats_back.data_ptr() == floats.data_ptr()


@pytest.mark.parametrize("device", devices())
def test_the_conversion_is_one_operator(device: str) -> None:
    """No scalar tensors filled on the side: the kernels left per call are the where."""
    args = attention_inputs(device, torch.float16 if device == "cuda" else torch.float32)
    convert(*args)  # a first call may check cuDNN's conversion
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        convert(*args)
    outermost = [e.name for e in prof.events() if e.cpu_parent is None]
    assert outermost == ["aten::_fused_sdp_choice", "aten::where"], outermost
