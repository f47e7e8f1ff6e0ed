"""Row kernels whose whole outputs, in eager's layout, do not lay a row out as one run:
a group profiled on row-major tensors, reduced over N, H and W beside its elementwise
result (a bias gradient summed beside the gradient), then called with a permuted
activation (NHWC sizes over NCHW memory), as timm's MaxViT hands its backward such
gradients. The rows (channels) are read through the input's strides and each whole
output's elements are stored where its strides put them (TensorOutput::rows_apart):
eager's strides and values, and no call runs interpreted (before, every such call did)."""

from __future__ import annotations

import pytest
import torch

import fuser
from helpers import devices, eager_from_source, run_optimized, script_from_source, torch_threads

SUM_BESIDE = "def f(x, m):\n    y = x * m + 1.0\n    return y, y.sum([0, 1, 2])\n"
MEAN_AND_SQUARE = (
    "def f(x, m):\n    y = (x - m).relu()\n    return y * y, y.mean([0, 1, 2], keepdim=True)\n"
)


def permuted(
    n: int, c: int, h: int, w: int, device: str, dtype: torch.dtype, order: str = "nchw"
) -> torch.Tensor:
    """[n, h, w, c] over NCHW memory, or over NCWH memory (H and W transposed too: a
    row of three dims that do not merge)."""
    if order == "nchw":
        return torch.randn(n, c, h, w, device=device, dtype=dtype).permute(0, 2, 3, 1)
    return torch.randn(n, c, w, h, device=device, dtype=dtype).permute(0, 3, 2, 1)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("text", [SUM_BESIDE, MEAN_AND_SQUARE], ids=["sum", "mean"])
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("order", ["nchw", "ncwh"])
def test_whole_outputs_of_rows_that_are_not_runs(fused, device, dtype, text, batch, order) -> None:
    fn = script_from_source(text)
    m = torch.randn(batch, 5, 7, 24, device=device, dtype=dtype)
    run_optimized(fn, torch.randn(batch, 5, 7, 24, device=device, dtype=dtype), m)
    x = permuted(batch, 24, 5, 7, device, dtype, order)
    got = fn(x, m)
    want = eager_from_source(text)(x, m)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 2e-2}
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert g.stride() == w.stride(), (g.stride(), w.stride())
        torch.testing.assert_close(g, w, **tol)
    stats = fuser.stats()
    assert stats["interpreted_runs"] == 0 and stats["groups_formed"] == 1
    # Where NVRTC is present, the CUDA form of each kernel compiled too (conftest.py).
    assert stats["cuda_cross_compile_failures"] == 0


@pytest.mark.parametrize("device", devices())
def test_a_bias_gradient_beside_a_permuted_incoming_gradient(fused, device) -> None:
    fn = script_from_source(
        "def f(x, b):\n    return torch.nn.functional.dropout(x + b, 0.1, True) * 2.0\n"
    )
    for call in range(4):
        x = torch.randn(2, 6, 6, 32, device=device, requires_grad=True)
        b = torch.randn(32, device=device, requires_grad=True)
        torch.manual_seed(call)
        out = fn(x, b)
        # Profiled row-major, then arriving as the permute of an NCHW tensor.
        grad = torch.randn(2, 32, 6, 6, device=device)
        grad = grad.permute(0, 2, 3, 1) if call >= 2 else grad.permute(0, 2, 3, 1).contiguous()
        out.backward(grad)
        # Eager's gradients from the same mask: the kept elements are out's nonzeros.
        kept = (out != 0).to(grad.dtype)
        want_x = grad * kept * (2.0 / 0.9)
        torch.testing.assert_close(x.grad, want_x, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(b.grad, want_x.sum([0, 1, 2]), rtol=1e-4, atol=1e-4)
    assert fuser.stats()["interpreted_runs"] == 0


ADD_TO_LAYER_NORM = (
    "def f(t, x, w, b):\n"
    "    return t + torch.nn.functional.layer_norm(x, [x.size(-1)], w, b, 1e-5)\n"
)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("tokens, width", [(20, 48), (50, 256)])
def test_an_addend_that_arrives_transposed_against_its_profile(
    fused, device, dtype, tokens, width
) -> None:
    # Twins-SVT's and DaViT's backward add a transposed gradient to layer_norm's input
    # gradient: the row kernel reads the addend's rows across its strides and stores the
    # sum in eager's layout of it (the addend's, transposed), element by element.
    # (150 rows of 256 on the CPU: two threads, each range starting at a multiple of 64
    # rows.)
    fn = script_from_source(ADD_TO_LAYER_NORM)
    x = torch.randn(3, tokens, width, device=device, dtype=dtype)
    w = torch.randn(width, device=device, dtype=dtype)
    b = torch.randn(width, device=device, dtype=dtype)
    run_optimized(fn, torch.randn(3, tokens, width, device=device, dtype=dtype), x, w, b)
    for t in (
        torch.randn(3, width, tokens, device=device, dtype=dtype).transpose(1, 2),
        torch.randn(tokens, width, 3, device=device, dtype=dtype).permute(2, 0, 1),
    ):
        with torch_threads(2):
            got = fn(t, x, w, b)
        want = eager_from_source(ADD_TO_LAYER_NORM)(t, x, w, b)
        assert got.stride() == want.stride(), (got.stride(), want.stride())
        tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {}
        torch.testing.assert_close(got, want, **tol)
    stats = fuser.stats()
    assert stats["interpreted_runs"] == 0 and stats["groups_formed"] == 1
    assert stats["cuda_cross_compile_failures"] == 0


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize(
    "text",
    [
        "def f(x, y):\n    return torch.softmax(x, -1) * y\n",
        "def f(x, y):\n    return torch.softmax(x, -1) * x + y\n",  # x read by others too
    ],
    ids=["only", "also"],
)
def test_a_normalized_input_across_strides_is_left_to_aten(fused, device, text) -> None:
    # ATen's copy-then-normalize beats reading each row across strides (1.55x on CPU):
    # such calls run interpreted, with eager's values.
    fn = script_from_source(text)
    y = torch.randn(4, 30, 40, device=device)
    run_optimized(fn, torch.randn(4, 30, 40, device=device), y)
    x = torch.randn(4, 40, 30, device=device).transpose(1, 2)
    torch.testing.assert_close(fn(x, y), eager_from_source(text)(x, y))
    assert fuser.stats()["interpreted_runs"] == 1


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("width", [512, 1024])
def test_long_cpu_rows_across_strides_are_left_to_aten(fused, device, width) -> None:
    # Each element of such a row is a cache line of its own: on the CPU rows of over
    # 512 elements ran slower than eager's ops (2.8x at 1024), so those calls run
    # interpreted; CUDA and shorter rows run the kernel. Values as eager's either way.
    text = "def f(x, m):\n    y = x * m\n    return y - y.mean(-1, keepdim=True)\n"
    fn = script_from_source(text)
    m = torch.randn(64, width, device=device)
    run_optimized(fn, torch.randn(64, width, device=device), m)
    x = torch.randn(width, 64, device=device).t()
    got, want = fn(x, m), eager_from_source(text)(x, m)
    assert got.stride() == want.stride()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    interpreted = device == "cpu" and width > 512
    assert fuser.stats()["interpreted_runs"] == int(interpreted)
