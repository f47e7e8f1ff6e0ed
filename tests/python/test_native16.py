"""16-bit adds, subtracts and multiplies on the GPU's own 16-bit instructions
(csrc/codegen/native16.h): which ops the CUDA printer computes natively, read from the
printed source (no GPU needed), and fused results equal to eager's bit for bit over
every float16 and bfloat16 value and half a million pairs of them (CUDA, and the CPU
kernels' float-and-round form beside it)."""

from __future__ import annotations

import os
import re

import pytest
import torch

import fuser
from fuser import _C
from helpers import (
    assert_same_bits,
    devices,
    eager_from_source,
    every_value,
    pairs,
    run_optimized,
    script_from_source,
)

nvrtc_ok, nvrtc_why = _C.nvrtc_available()
needs_nvrtc = pytest.mark.skipif(not nvrtc_ok, reason=f"NVRTC not found: {nvrtc_why}")

# (a + b) * 0.5 - a: every op native (0.5 is a 16-bit value); times 0.1 is not (0.1
# rounds differently in float and in 16 bits), so its result is rounded as a float.
MIXED = torch._C.parse_ir(
    """
graph(%a : Tensor, %b : Tensor):
  %one : int = prim::Constant[value=1]()
  %half : float = prim::Constant[value=0.5]()
  %tenth : float = prim::Constant[value=0.1]()
  %s : Tensor = aten::add(%a, %b, %one)
  %p : Tensor = aten::mul(%s, %half)
  %q : Tensor = aten::mul(%p, %tenth)
  %o : Tensor = aten::sub(%q, %a, %one)
  return (%o)
"""
)

NATIVE_CALL = re.compile(r"fx_(h|bf)(add|sub|mul)\((v\d+_b|\(uint16_t\)0x[0-9a-f]{4}), ")


def native_calls(source: str) -> list[tuple[str, str, str]]:
    body = source[source.index('extern "C"') :]
    return NATIVE_CALL.findall(body)


@needs_nvrtc
@pytest.mark.parametrize(
    "dtype, prefix, half_bits",
    [(torch.float16, "h", "0x3800"), (torch.bfloat16, "bf", "0x3f00")],
    ids=["float16", "bfloat16"],
)
@pytest.mark.parametrize("layout", ["flat", "strided", "rows", "broadcast_rows", "tiles"])
def test_exact_ops_are_native_and_compile(dtype, prefix, half_bits, layout):
    source = _C.kernel_source(MIXED, [dtype, dtype], [False, False], "cuda", layout)
    calls = native_calls(source)
    ops = [op for p, op, _ in calls if p == prefix]
    assert len(ops) == len(calls), calls  # one format only
    # Each loop of the kernel computes the add, the multiply by 0.5 and the subtract
    # natively, never the multiply by 0.1.
    assert ops and ops.count("add") == ops.count("mul") == ops.count("sub"), ops
    assert f"(uint16_t){half_bits}" in source
    assert "0x3dcd" not in source and "0x2e66" not in source  # 0.1 in 16 bits: never
    for major in (9, 8):  # bfloat16's instructions from sm_90, float math before
        assert _C.nvrtc_compile(source, major, 0)[:4] == b"\x7fELF"


@needs_nvrtc
def test_float32_and_mixed_formats_stay_float():
    assert (
        native_calls(_C.kernel_source(MIXED, [torch.float32] * 2, [False] * 2, "cuda", "flat"))
        == []
    )
    # float16 beside bfloat16 promotes to float: no 16-bit format holds both operands.
    mixed = _C.kernel_source(MIXED, [torch.float16, torch.bfloat16], [False] * 2, "cuda", "flat")
    assert native_calls(mixed) == []


BINARY = {
    "native_chain": "def f(a, b):\n    return (a + b) * 0.5 - a\n",
    "float_constant": "def f(a, b):\n    return (a * b) * 0.1 + b\n",
    "scalar_minus": "def f(a, b):\n    return (a * b - 3.0).relu() * b\n",
    "reused_sum": "def f(a, b):\n    s = a + b\n    return s * s - b, s\n",
}

TANH_GELU = """
def f(x):
    inner = 0.7978845608028654 * (x + 0.044715 * torch.pow(x, 3.0))
    return 0.5 * x * (1.0 + torch.tanh(inner))
"""


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_chains_equal_eager_bit_for_bit(name, dtype, device, fused):
    a, b = pairs(dtype, device)
    got = run_optimized(script_from_source(BINARY[name]), a, b)
    want = eager_from_source(BINARY[name])(a, b)
    for g, w in zip(
        got if isinstance(got, tuple) else (got,),
        want if isinstance(want, tuple) else (want,),
        strict=True,
    ):
        assert_same_bits(g, w)
    assert fuser.stats()["kernel_launches"] > 0


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_tanh_gelu_equals_eager_on_every_value(dtype, device, fused):
    x = every_value(dtype, device)
    got = run_optimized(script_from_source(TANH_GELU), x)
    assert_same_bits(got, eager_from_source(TANH_GELU)(x))
    assert fuser.stats()["kernel_launches"] > 0


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("exponent", [2.0, 3.0, -1.0, -2.0, 0.5, -0.5, 1.5])
def test_powers_equal_eager_on_every_value(exponent, dtype, device, fused):
    # Eager rounds the square before cubing or inverting it, but for float16 on the CPU.
    source = f"def f(x):\n    return torch.pow(x, {exponent}) + x\n"
    x = every_value(dtype, device)
    got = run_optimized(script_from_source(source), x)
    assert_same_bits(got, eager_from_source(source)(x))
    assert fuser.stats()["kernel_launches"] > 0


# A quotient by a value the same over a row (its maximum over y's row), rounded to 16
# bits, then times w (ones): CUDA row and column kernels take such a rounded quotient as
# a product with the row's reciprocal (fx_hquot) but where that could round otherwise.
# y's first element of each row holds the row's divisor, its others -inf; x's rows hold
# every value of the format between them. Rows over the last dim ([rows, 4096]) or
# over the channels ([1, 4096, rows], rows side by side: a column kernel).
QUOTIENTS = {
    "rows": "def f(x, y, w):\n    return x / y.amax(-1, keepdim=True) * w\n",
    "columns": "def f(x, y, w):\n    return x / y.amax(1, keepdim=True) * w\n",
}
ROW_LENGTH = 4096  # values of x a row; 16 rows hold all 65536


def quotient_inputs(
    dtype: torch.dtype, divisors: torch.Tensor, device: str, walk: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    rows = 16 * divisors.numel()
    x = every_value(dtype, device).view(16, ROW_LENGTH).repeat(divisors.numel(), 1)
    y = torch.full((rows, ROW_LENGTH), float("-inf"), device=device, dtype=dtype)
    y[:, 0] = divisors.repeat_interleave(16)
    w = torch.ones(ROW_LENGTH, device=device, dtype=dtype)
    if walk == "rows":
        return x, y, w
    columns = (x.t().contiguous().unsqueeze(0), y.t().contiguous().unsqueeze(0))
    return columns[0], columns[1], w.view(1, ROW_LENGTH, 1)


def cuda_forms(before: int) -> list[str]:
    """The CUDA kernels compiled since `before` (on a GPU, or for sm_90 on the CPU)."""
    return [
        s[s.index("__global__") :] for s in fuser.kernel_sources()[before:] if "__global__" in s
    ]


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype, prefix", [(torch.float16, "h"), (torch.bfloat16, "bf")])
@pytest.mark.parametrize("walk", sorted(QUOTIENTS))
def test_quotients_by_a_row_value_equal_eager_bit_for_bit(
    dtype, prefix, walk, device, variant_flags
):
    """Every value of the format over divisors spread across it (every 16th bit pattern
    on CUDA: zeros, subnormals, infinities and NaNs among them; every 1024th on the CPU,
    whose kernels divide), each of the kernel's variants on CUDA; the CUDA forms take the
    quotient through fx_hquot / fx_bfquot, and the column kernel's storing walk through
    their quick forms, its steps computed again where one needs the division."""
    values = every_value(dtype, device)
    step = 16 if device == "cuda" else 1024
    divisors = torch.cat([values[::step], values[1::4099]])
    fused = script_from_source(QUOTIENTS[walk])
    eager = eager_from_source(QUOTIENTS[walk])
    before = len(fuser.kernel_sources())
    for variant in range(4) if device == "cuda" else [-1]:
        fuser._C._set_variant_choice(variant < 0, variant)
        fuser._C._forget_variant_choices()
        fuser.reset_stats()
        with fuser.enabled(True):
            for chunk in divisors.split(256):
                args = quotient_inputs(dtype, chunk, device, walk)
                assert_same_bits(run_optimized(fused, *args), eager(*args), str(variant))
        stats = fuser.stats()
        assert stats["row_launches"] >= 1 and stats["interpreted_runs"] == 0, stats
    forms = cuda_forms(before)
    if device == "cuda" or os.environ.get("FUSER_CROSS_COMPILE"):
        # (A kernel of rows cut in slices may only reduce: the quotient is the next's.)
        assert any(f"fx_{prefix}quot(" in f for f in forms), len(forms)
        if walk == "columns":
            assert any(f"fx_{prefix}quot_quick(" in f for f in forms), len(forms)


@pytest.mark.parametrize("device", devices())
def test_quotients_by_a_float_divisor_divide(device):
    """A float32 divisor is no float16 value: its reciprocal may overflow where the
    quotient does not (a row sum of 2e-40: 1 / 2e-40 is infinite), so a quotient rounded
    to float16 from float32 operands is a division."""
    text = "def f(x, w):\n    return (x / x.sum(-1, keepdim=True)).half() * w\n"
    x = torch.zeros(8, 256, device=device)
    x[:, 1] = x[:, 2] = 1e-40
    x[4:] = torch.rand(4, 256, device=device)
    w = torch.ones(256, device=device, dtype=torch.float16)
    before = len(fuser.kernel_sources())
    with fuser.enabled(True):
        got = run_optimized(script_from_source(text), x, w)
    assert_same_bits(got, eager_from_source(text)(x, w))
    assert not any("fx_hquot(" in f for f in cuda_forms(before))


@pytest.mark.skipif(
    os.environ.get("FUSER_CROSS_COMPILE") is None, reason="reads CUDA forms of CPU kernels"
)
@pytest.mark.parametrize("dtype, prefix", [(torch.float16, "h"), (torch.bfloat16, "bf")])
@pytest.mark.parametrize("dim, width", [(1, 64), (-1, 64), (-1, 5000)])
def test_row_and_column_kernels_compute_16bit_ops_natively(dtype, prefix, dim, width):
    """A LayerNorm written out (over NCHW's channels, ConvNeXt's channels-first one; over
    the last dim, in rows held in registers and in rows walked from memory): its CUDA
    kernel subtracts the mean, squares and applies the weight on 16-bit instructions, and
    divides by the row's deviation through its reciprocal (read from the CUDA forms
    compiled on the CPU)."""
    text = (
        "def f(x, w):\n"
        f"    u = x.mean({dim}, keepdim=True)\n"
        "    d = x - u\n"
        f"    return d / torch.sqrt((d * d).mean({dim}, keepdim=True) + 1e-6) * w\n"
    )
    x = torch.randn(2, width, 5, 7).to(dtype) if dim == 1 else torch.randn(3, 4, width).to(dtype)
    w = torch.randn(1, width, 1, 1).to(dtype) if dim == 1 else torch.randn(width).to(dtype)
    before = len(fuser.kernel_sources())
    with fuser.enabled(True):
        got = run_optimized(script_from_source(text), x, w)
    torch.testing.assert_close(got, eager_from_source(text)(x, w), rtol=2e-2, atol=2e-2)
    sources = [s for s in fuser.kernel_sources()[before:] if "__global__" in s and "fx_lane" in s]
    assert sources, "no CUDA row kernel was compiled"
    for s in sources:
        body = s[s.index("__global__") :]
        assert f"fx_{prefix}sub(" in body and f"fx_{prefix}mul(" in body, prefix
        assert f"fx_{prefix}quot(" in body, prefix
