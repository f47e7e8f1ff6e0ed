"""layer_norm's backward in training graphs (passes/layer_norm_backward.cpp): autodiff's
native_layer_norm_backward gives its input gradient to a row group as
fuser::layer_norm_input_grad, fused with the gradients around it (gelu_backward, a
residual's sum), and its weight and bias gradients, sums over the leading dims, to a
column group (the CPU's 16-bit statistics widened to float first). Every gradient
equals eager's; a lone backward and non-constant masks stay as they were; calls the
row kernel cannot serve run the group's subgraph."""

from __future__ import annotations

import pytest
import torch

import fuser
from helpers import all_nodes, devices, eager_from_source, fused_kinds, script_from_source

INPUT_GRAD = "fuser::layer_norm_input_grad"
TOLERANCE = {
    torch.float16: {"rtol": 5e-3, "atol": 5e-3},
    torch.bfloat16: {"rtol": 3e-2, "atol": 3e-2},
}

# A transformer block's tail: the residual add, layer_norm and GELU. Its backward
# reads gelu_backward's result into layer_norm's backward, whose input gradient is the
# residual's gradient too.
BLOCK = (
    "def f(x, w, b, r):\n"
    "    h = torch.nn.functional.gelu(x * 1.5) + r\n"
    "    return torch.nn.functional.gelu(torch.layer_norm(h, {shape}, w, b, 1e-5), "
    "approximate={approximate!r})\n"
)


def backward_of(fn, args, weights, calls: int = 4):
    """Gradients of (fn(*args) * weights).sum() over `calls` calls with the fuser on, and
    the backward's optimized graph (run on this thread: autograd's CUDA thread would
    keep it to itself)."""
    with fuser.enabled(True), torch.autograd.set_multithreading_enabled(False):
        for _ in range(calls):
            ours = [a.clone().requires_grad_() if a is not None else None for a in args]
            out = fn(*ours)
            grads = torch.autograd.grad((out * weights).sum(), [a for a in ours if a is not None])
        return out, grads, torch.jit.last_executed_optimized_graph()


def eager_backward(fn, args, weights):
    ours = [a.clone().requires_grad_() if a is not None else None for a in args]
    out = fn(*ours)
    grads = torch.autograd.grad((out * weights).sum(), [a for a in ours if a is not None])
    return out, grads


def block_args(device: str, dtype: torch.dtype, shape: tuple[int, ...], normalized: int):
    g = torch.Generator().manual_seed(0)
    row = shape[len(shape) - normalized :]

    def rand(*s: int, scale: float = 1.0, shift: float = 0.0) -> torch.Tensor:
        return (torch.randn(*s, generator=g) * scale + shift).to(device, dtype)

    # A residual far from zero mean: the centring of the formula matters.
    return [rand(*shape), rand(*row, shift=1.0), rand(*row), rand(*shape, scale=3.0, shift=2.0)]


def check_block(device, dtype, shape, normalized, approximate="none", shape_text=None):
    """`shape_text`: how the block writes normalized_shape (default: the constant)."""
    if shape_text is None:
        shape_text = str(list(shape[len(shape) - normalized :]))
    text = BLOCK.format(shape=shape_text, approximate=approximate)
    fn, eager = script_from_source(text), eager_from_source(text)
    args = block_args(device, dtype, shape, normalized)
    weights = torch.randn(shape, generator=torch.Generator().manual_seed(1)).to(device, dtype)
    fuser.reset_stats()
    got, got_grads, backward = backward_of(fn, args, weights)
    want, want_grads = eager_backward(eager, args, weights)
    tol = TOLERANCE.get(dtype, {})
    torch.testing.assert_close(got, want, **tol)
    for g, w in zip(got_grads, want_grads, strict=True):
        assert (g.shape, g.dtype, g.stride()) == (w.shape, w.dtype, w.stride())
        torch.testing.assert_close(g, w, **tol)
    return backward


def assert_weight_and_bias_gradients_summed(backward: torch._C.Graph) -> None:
    """The weight and bias gradients are sums over the leading dims in a group, and no
    ATen op is left."""
    left = [n for n in all_nodes(backward) if n.kind() == "aten::native_layer_norm_backward"]
    assert "aten::sum" in fused_kinds(backward) and not left, backward


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_input_gradient_fuses_with_the_gelu_gradients(
    device: str, dtype: torch.dtype, approximate: str
) -> None:
    backward = check_block(device, dtype, (3, 10, 48), 1, approximate)
    kinds = fused_kinds(backward)
    assert {INPUT_GRAD, "aten::gelu_backward"} <= kinds, backward
    assert_weight_and_bias_gradients_summed(backward)
    assert fuser.stats()["interpreted_runs"] == 0, fuser.stats()


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_normalized_shape_read_from_the_weight(device: str, dtype: torch.dtype) -> None:
    """nanoGPT's LayerNorm, `F.layer_norm(x, self.weight.shape, ...)`: the backward
    reads normalized_shape as an input list. The guard pins it to the weight's sizes,
    and the gradients fuse as with a constant list."""
    backward = check_block(device, dtype, (3, 10, 48), 1, shape_text="w.shape")
    assert {INPUT_GRAD, "aten::gelu_backward"} <= fused_kinds(backward), backward
    assert_weight_and_bias_gradients_summed(backward)
    guards = [n for n in all_nodes(backward) if n.kind() == "fuser::TypeGuard"]
    assert any("lists=[1, 48]" in str(n) for n in guards), backward  # one list: [48]
    assert fuser.stats()["interpreted_runs"] == 0, fuser.stats()


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize(
    "shape,normalized",
    [((4, 3, 5, 8), 2), ((7, 1), 1), ((2, 1, 33), 1), ((1, 300), 1), ((5, 4100), 1)],
    ids=["two_dims", "rows_of_one", "ragged", "one_row", "long_rows"],
)
def test_input_gradient_shapes(device: str, shape: tuple[int, ...], normalized: int) -> None:
    """Rows over two dims, rows of one element (the gradient is zero), one row, and
    rows too long for registers."""
    backward = check_block(device, torch.float32, shape, normalized)
    assert INPUT_GRAD in fused_kinds(backward), backward


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_input_gradient_of_16_bit_dtypes(device: str, dtype: torch.dtype) -> None:
    """16-bit gradients are computed in float and rounded once, against eager's
    float statistics (CUDA) or statistics of the input's dtype (CPU)."""
    backward = check_block(device, dtype, (6, 64), 1)
    assert INPUT_GRAD in fused_kinds(backward), backward
    assert_weight_and_bias_gradients_summed(backward)


@pytest.mark.parametrize("device", devices())
def test_layer_norm_without_affine(device: str) -> None:
    """No weight and no bias: the backward asks for the input gradient alone, and no
    ATen call is left."""
    text = (
        "def f(x, r):\n"
        "    h = x * 2.0 + r\n"
        "    return torch.tanh(torch.layer_norm(h, [32], None, None, 1e-5)) * 3.0\n"
    )
    fn, eager = script_from_source(text), eager_from_source(text)
    args = [torch.randn(9, 32, device=device), torch.randn(9, 32, device=device) + 5.0]
    weights = torch.randn(9, 32, device=device)
    _, got_grads, backward = backward_of(fn, args, weights)
    _, want_grads = eager_backward(eager, args, weights)
    for g, w in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(g, w)
    assert INPUT_GRAD in fused_kinds(backward), backward
    kinds = {n.kind() for n in all_nodes(backward)}
    assert "aten::native_layer_norm_backward" not in kinds, backward


SCRIPTED_BACKWARD = (
    "def f(g, x, mean, rstd, w, b):\n"
    "    gi, gw, gb = torch.ops.aten.native_layer_norm_backward(\n"
    "        g * 2.0, x, [16], mean, rstd, w, b, [True, True, True])\n"
    "    return gi + 1.0, gw, gb\n"
)


def scripted_backward_args(device: str, mean_shape: tuple[int, ...]):
    x = torch.randn(5, 16, device=device) * 2.0 + 1.0
    _, mean, rstd = torch.native_layer_norm(x, [16], None, None, 1e-5)
    w, b = torch.randn(16, device=device), torch.randn(16, device=device)
    g = torch.randn(5, 16, device=device)
    return [g, x, mean.reshape(mean_shape), rstd.reshape(mean_shape), w, b]


def compare_called(text: str, args: list) -> object:
    """Three calls of `text` scripted, with the fuser on and its stats reset first;
    each result equal to eager's. Returns the optimized graph."""
    fn, eager = script_from_source(text), eager_from_source(text)
    fuser.reset_stats()
    with fuser.enabled(True):
        for _ in range(3):
            got = fn(*args)
    for g, w in zip(got, eager(*args), strict=True):
        torch.testing.assert_close(g, w)
    return torch.jit.last_executed_optimized_graph()


@pytest.mark.parametrize("device", devices())
def test_called_directly_with_every_gradient(device: str) -> None:
    graph = compare_called(SCRIPTED_BACKWARD, scripted_backward_args(device, (5, 1)))
    assert INPUT_GRAD in fused_kinds(graph), graph
    assert fuser.stats()["row_launches"] >= 1, fuser.stats()


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_16_bit_parameter_gradients_round_once(device: str, dtype: torch.dtype) -> None:
    """The weight gradient of a 16-bit input is summed from a product that never rounds
    to 16 bits (the CPU's 16-bit statistics are widened first): against the float64
    sum of the same values, it is as accurate as eager's kernel, within one rounding of
    the result (a product rounded at each of its three ops is not)."""
    torch.manual_seed(0)
    x = (torch.randn(64, 32, 16, device=device) * 2.0 + 1.0).to(dtype)
    w, b = torch.randn(16, device=device).to(dtype), torch.randn(16, device=device).to(dtype)
    _, mean, rstd = torch.native_layer_norm(x, [16], w, b, 1e-5)
    g = torch.randn(64, 32, 16, device=device).to(dtype)
    fn, eager = script_from_source(SCRIPTED_BACKWARD), eager_from_source(SCRIPTED_BACKWARD)
    with fuser.enabled(True):
        for _ in range(3):
            _, got, _ = fn(g, x, mean, rstd, w, b)
    graph = torch.jit.last_executed_optimized_graph()
    assert_weight_and_bias_gradients_summed(graph)
    _, want, _ = eager(g, x, mean, rstd, w, b)
    d = [t.double() for t in (g, x, mean, rstd)]
    exact = (d[0] * 2.0 * (d[1] - d[2]) * d[3]).sum([0, 1])
    ulp = torch.finfo(dtype).eps * exact.abs()
    fused_error = (got.double() - exact).abs()
    eager_error = (want.double() - exact).abs()
    assert got.dtype == want.dtype and got.shape == want.shape
    assert bool((fused_error <= eager_error + ulp).all()), (fused_error - eager_error).max()


@pytest.mark.parametrize("device", devices())
def test_flat_statistics_run_the_subgraph(device: str) -> None:
    """A mean and rstd given flat, one per row: eager reads them so, the kernel would
    broadcast them along the wrong dim, so the call runs the group's subgraph."""
    compare_called(SCRIPTED_BACKWARD, scripted_backward_args(device, (5,)))
    assert fuser.stats()["interpreted_runs"] >= 1, fuser.stats()


@pytest.mark.parametrize("device", devices())
def test_non_constant_mask_is_left_alone(device: str) -> None:
    text = (
        "def f(g, x, mean, rstd, w, b, want_w: bool):\n"
        "    gi, gw, gb = torch.ops.aten.native_layer_norm_backward(\n"
        "        g * 2.0, x, [16], mean, rstd, w, b, [True, want_w, True])\n"
        "    return gi + 1.0, gb\n"
    )
    graph = compare_called(text, scripted_backward_args(device, (5, 1)) + [True])
    assert INPUT_GRAD not in {n.kind() for n in all_nodes(graph)}, graph


@pytest.mark.parametrize("device", devices())
def test_lone_backward_stays_one_aten_call(device: str) -> None:
    """No fusible neighbour: the three gradients stay one ATen call (the CPU's walks the
    rows once for all of them)."""
    text = (
        "def f(g, x, mean, rstd, w, b):\n"
        "    return torch.ops.aten.native_layer_norm_backward(\n"
        "        g, x, [16], mean, rstd, w, b, [True, True, True])\n"
    )
    graph = compare_called(text, scripted_backward_args(device, (5, 1)))
    assert INPUT_GRAD not in {n.kind() for n in all_nodes(graph)}, graph
