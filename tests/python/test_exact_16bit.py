"""float16 and bfloat16 results equal to eager's bit for bit (DESIGN.md, section 5):
each op over every 16-bit value, binary ops over half a million pairs, on the CPU and
on CUDA. Eager's CPU and CUDA kernels round differently in places (a scalar operand or
alpha of an add, the square in a power, relu's zero, a scalar divisor, addcmul's order),
and ours follow each.

Not listed, because eager's own functions differ from the C library's in the last float
bit and a few rounded values show it: on the CPU (vectorized SLEEF functions) tanh,
sin, asin, erf, gelu, mish, atan2, bfloat16 sinh and cosh; on CUDA exp2 (eager's exp2f,
ours pow). Nor floor division, whose formula in eager rounds otherwise near ties, nor
fmod and remainder on the CPU, where eager's bfloat16 is NaN for quotients past float's
range (ours exact: test_vector_math.py), nor
a scalar with alpha on CUDA (x - 0.7 * 0.3: eager's FMA leaves the product unrounded;
two float16 values differ)."""

from __future__ import annotations

import os

import pytest
import torch

import fuser
from helpers import (
    all_nodes,
    assert_same_bits,
    devices,
    eager_from_source,
    every_value,
    pairs,
    run_optimized,
    script_from_source,
)

F = "torch.nn.functional"
UNARY = [
    "x.abs()", "-x", "x.relu()", f"{F}.relu6(x)", "x.sigmoid()", "x.exp()", "x.expm1()",
    "x.log()", "x.log1p()", "x.log2()", "x.log10()", "x.sqrt()", "x.rsqrt()",
    "x.reciprocal()", "x.cos()", "x.tan()", "x.acos()", "x.atan()", "x.floor()", "x.ceil()",
    "x.round()", "x.trunc()", "x.sign()", "x.frac()", f"{F}.silu(x)", f"{F}.hardswish(x)",
    f"{F}.hardsigmoid(x)", f"{F}.softplus(x)", f"{F}.elu(x)", f"{F}.leaky_relu(x, 0.1)",
    f"{F}.hardtanh(x)", "x * x", "x + 1.5", "x * 0.3", "x / 3.0", "x - 0.1", "0.1 - x",
    "torch.clamp(x, -1.0, 2.0)", "torch.lerp(x, x * 0.5, 0.3)", "x / 0.3", "0.3 / x",
    "torch.add(x, 0.1, alpha=2)", "x * 0.1 + 0.2", "torch.rsub(x, 0.3)",
    f"{F}.hardtanh(x, -0.3, 0.7)", "torch.clamp(x, min=0.1)", f"{F}.leaky_relu(x, 0.3)",
    "torch.where(x > 0.3, x, 0.1)", f"{F}.softplus(x, 2.0, 5.0)", "x.pow(2.5)",
]  # fmt: skip
UNARY_BY_DEVICE = {
    "cpu": ["x.exp2()"],
    "cuda": [
        "x.tanh()", "x.sin()", "x.asin()", "x.erf()", "x.sinh()", "x.cosh()",
        f"{F}.gelu(x)", f"{F}.gelu(x, approximate='tanh')", f"{F}.mish(x)",
    ],
}  # fmt: skip
BINARY = [
    "a + b", "a - b", "a * b", "a / b", "torch.maximum(a, b)", "torch.minimum(a, b)",
    "torch.pow(a, b)", "torch.where(a > b, a, b * 0.5)", "a * b + a", "(a - b) * (a + b)",
    "torch.lerp(a, b, 0.3)", "a.sigmoid() * b", f"{F}.silu(a) * b", "torch.clamp(a, max=b)",
    "torch.addcmul(a, a, b, value=0.3)", "torch.addcdiv(a, b, a, value=0.3)",
    "torch.addcmul(a, b, b, value=0.5)", "torch.add(a, b, alpha=0.3)",
    "torch.sub(a, b, alpha=0.3)", "torch.rsub(a, b, alpha=0.3)", "a * b * 0.3", "(a + b) / 0.7",
    "torch.lerp(a, b, a)", "torch.where(a > b, a - 0.1, b + 0.1)", "torch.clamp(a, min=b)",
]  # fmt: skip
BINARY_BY_DEVICE = {
    "cpu": [],
    "cuda": ["torch.atan2(a, b)", "torch.fmod(a, b)", "torch.remainder(a, b)"],
}
CHUNK = 8  # ops per scripted function: one kernel computes them all


def chunks(ops: list[str]) -> list[list[str]]:
    return [ops[i : i + CHUNK] for i in range(0, len(ops), CHUNK)]


def check_all(ops: list[str], params: str, *args: torch.Tensor) -> None:
    source = f"def f({params}):\n    return ({', '.join(ops)},)\n"
    fn = script_from_source(source)
    got = run_optimized(fn, *args)
    want = eager_from_source(source)(*args)
    # Every op ran in a fused kernel: none is left to eager beside the groups.
    assert fuser.stats()["kernel_launches"] > 0
    graph = fn.graph_for(*args)
    assert not [n.kind() for n in all_nodes(graph) if n.kind().startswith("aten::")], graph
    for op, g, w in zip(ops, got, want, strict=True):
        assert_same_bits(g, w, op)


def unary_cases() -> list:
    return [
        pytest.param(device, ops, id=f"{device}-{i}")
        for device in devices()
        for i, ops in enumerate(chunks(UNARY + UNARY_BY_DEVICE[device]))
    ]


def binary_cases() -> list:
    return [
        pytest.param(device, ops, id=f"{device}-{i}")
        for device in devices()
        for i, ops in enumerate(chunks(BINARY + BINARY_BY_DEVICE[device]))
    ]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("device, ops", unary_cases())
def test_unary_ops_on_every_value(device, ops, dtype, fused):
    check_all(ops, "x", every_value(dtype, device))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("device, ops", binary_cases())
def test_binary_ops_on_pairs(device, ops, dtype, fused):
    check_all(ops, "a, b", *pairs(dtype, device))


@pytest.mark.skipif(
    not torch.cuda.is_available() and os.environ.get("FUSER_CROSS_COMPILE") is None,
    reason="needs CUDA, or FUSER_CROSS_COMPILE for the CUDA forms of CPU kernels",
)
@pytest.mark.parametrize(
    "dtype, branch_free",
    [(torch.float16, True), (torch.bfloat16, False), (torch.float32, False)],
    ids=str,
)
def test_cuda_float16_sigmoid_has_no_division_branch(dtype, branch_free, fused):
    """CUDA computes a float16 sigmoid with its denominator clamped to 2^64 and no
    branch (cuda_prelude.h), a float16 value being all anyone sees of it; the every-value
    test above holds its bits to eager's on the GPU. bfloat16 has float's range, where
    the clamp would change results, and float32 results keep IEEE division."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = every_value(dtype, device) if dtype != torch.float32 else torch.randn(4096, device=device)
    source = "def f(x):\n    return (x.sigmoid() - 0.125) * x\n"
    before = len(fuser.kernel_sources())
    got = run_optimized(script_from_source(source), x)
    want = eager_from_source(source)(x)
    if dtype == torch.float32:
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    else:
        assert_same_bits(got, want, "sigmoid")
    new = [s for s in fuser.kernel_sources()[before:] if "__global__" in s]
    assert new
    assert all(("= fx_sigmoid_half(v" in s) == branch_free for s in new), new
