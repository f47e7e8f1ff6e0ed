"""CPU row kernels convert float16 rows as runs (codegen/cpp_row_printer.cpp,
chooseHalfRuns): in rows of up to 4096 elements each float16 input read along the row
is converted once per row into floats, and each float16 output is stored as floats and
converted after the loop that computes it (fx_h2f_run and fx_f2h_run: F16C where the
compiler targets it, 8 elements an instruction). The runs give the element-by-element
conversions' bits; longer rows keep those."""

from __future__ import annotations

import pytest
import torch
from test_reductions import compare

import fuser
from helpers import run_optimized, script_from_source

# Constants of their own keep these kernels' text apart from other tests' (a source the
# process compiled before is found in memory and not listed again).
LAYER_NORM = "def f(x, w, b):\n    return torch.layer_norm(x * 1.125, [x.size(-1)], w, b, 1e-5)\n"
# A weight the same in every row and a bias of each row's own: the weight's row is
# converted once, the bias's again in every row.
SCALED = (
    "def f(x, w, b):\n"
    "    y = x - x.mean(-1, keepdim=True)\n"
    "    return y * w + b, (y * 0.375).sum(-1, keepdim=True)\n"
)


def printed_kernels(before: int) -> list[str]:
    return [s for s in fuser.kernel_sources()[before:] if "__global__" not in s]


@pytest.mark.parametrize("row", [1, 7, 8, 9, 100, 1000, 4096, 4097, 5000])
def test_layer_norm_rows_match_eager(row: int) -> None:
    x = torch.randn(3, row).half()
    w, b = torch.randn(row).half(), torch.randn(row).half()
    with fuser.enabled(True):
        compare(LAYER_NORM, x, w, b, dtype=torch.float16)
    assert fuser.stats()["row_launches"] >= 2


@pytest.mark.parametrize("row", [9, 1000, 4096])
def test_a_weight_of_every_row_and_a_bias_of_each(row: int) -> None:
    x = torch.randn(5, row).half()
    w, b = torch.randn(row).half(), torch.randn(5, row).half()
    with fuser.enabled(True):
        compare(SCALED, x, w, b, dtype=torch.float16)


def test_each_float16_tensor_is_printed_as_a_run() -> None:
    """The kernel of SCALED (a constant of its own, so printed here): each input's row
    converted unless its offset is the row converted last, the output after its loop."""
    before = len(fuser.kernel_sources())
    x, w, b = torch.randn(5, 40).half(), torch.randn(40).half(), torch.randn(5, 40).half()
    with fuser.enabled(True):
        compare(SCALED.replace("0.375", "0.3125"), x, w, b, dtype=torch.float16)
    [kernel] = printed_kernels(before)
    for i in range(3):
        assert f"if (off{i} != fx_hin_at{i}) fx_h2f_run(in{i} + off{i}, fx_hin{i}, fx_n)" in kernel
    assert "fx_f2h_run(fx_hout0, out0 + fx_r * fx_n, fx_n)" in kernel


def test_a_strided_input_gives_the_bits_of_a_contiguous_one() -> None:
    """A softmax of a sum reading every other element of its second input, then the
    same values contiguous: the same bits, each eager's within tolerance."""
    source = "def f(x, y):\n    z = x + y * 0.8125\n    return torch.softmax(z, -1)\n"
    x, y = torch.randn(64, 300).half(), torch.randn(64, 600).half()[:, ::2]
    with fuser.enabled(True):
        fn = compare(source, x, y, dtype=torch.float16)
        strided = run_optimized(fn, x, y)
        contiguous = run_optimized(fn, x, y.contiguous())
    assert torch.equal(strided.view(torch.int16), contiguous.view(torch.int16))


def test_every_float16_value_loads_and_stores_exactly() -> None:
    """All 65536 float16 bit patterns through a run and back: eager's bits, but for a
    NaN's payload."""
    x = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.float16)
    x = x.reshape(16, 4096)
    source = "def f(x):\n    y = x * 1.0\n    return y, y.float().sum(-1, keepdim=True)\n"
    fn = script_from_source(source)
    with fuser.enabled(True):
        got, _ = run_optimized(fn, x)
    assert fuser.stats()["row_launches"] >= 2
    nan = x.isnan()
    assert torch.equal(got.isnan(), nan)
    assert torch.equal(got[~nan].view(torch.int16), x[~nan].view(torch.int16))


def test_float_values_round_to_float16_as_eager() -> None:
    """float32 values of every exponent (float16's subnormals, ties, overflow to
    infinity) rounded by the run's conversion: eager's bits."""
    g = torch.Generator().manual_seed(7)
    bits = torch.randint(0, 2**31 - 1, (16, 4096), generator=g, dtype=torch.int64)
    # Exponents from 2^-30 to 2^20 (float16 ends at 65504), both signs, some ties.
    exponent = torch.randint(97, 148, (16, 4096), generator=g) << 23
    sign = torch.randint(0, 2, (16, 4096), generator=g) << 31
    mantissa = bits & 0x7FFFFF
    mantissa[:, ::7] &= ~0xFFF  # ties and exact values: the 13 dropped bits 1000... or 0
    mantissa[:, ::7] |= 0x1000
    z = (sign | exponent | mantissa).to(torch.int32).view(torch.float32)
    source = "def f(z):\n    h = z.half()\n    return h, z.sum(-1, keepdim=True)\n"
    fn = script_from_source(source)
    with fuser.enabled(True):
        got, _ = run_optimized(fn, z)
    assert fuser.stats()["row_launches"] >= 2
    assert torch.equal(got.view(torch.int16), z.half().view(torch.int16))


def test_float16_roundings_between_ops_give_eager_bits() -> None:
    """Sums of float16 values of every exponent rounded to float16 between two ops
    (fx_round_h: float arithmetic for fx_f2h then fx_h2f), subnormal results and
    overflows to infinity included: eager's bits."""
    g = torch.Generator().manual_seed(11)
    a = torch.randint(-32768, 32768, (16, 4096), generator=g, dtype=torch.int32)
    b = torch.randint(-32768, 32768, (16, 4096), generator=g, dtype=torch.int32)
    a, b = a.to(torch.int16).view(torch.float16), b.to(torch.int16).view(torch.float16)
    b[:, ::3] = -a[:, ::3] * 0.9990234375  # near cancellations: subnormal sums
    source = "def f(a, b):\n    c = a + b\n    d = c * c\n"
    source += "    return d, d.float().sum(-1, keepdim=True)\n"
    fn = script_from_source(source)
    with fuser.enabled(True):
        got, _ = run_optimized(fn, a, b)
    assert fuser.stats()["row_launches"] >= 2
    want = (a + b) * (a + b)
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan)
    assert torch.equal(got[~nan].view(torch.int16), want[~nan].view(torch.int16))


# Element loops (codegen/cpp_printer.cpp): float16 inputs and outputs along the loop
# converted kHalfRun (256) elements at a time.


@pytest.mark.parametrize("shape", [(1001,), (3, 1000), (2, 70, 9), (5, 300)], ids=str)
def test_element_loops_convert_runs(shape: tuple[int, ...]) -> None:
    """Flat loops, rows with a bias of the last dim (unit stride) and short rows: the
    float16 output, each op rounded as eager rounds it (eager's bits), and a float32
    output beside it."""
    g = torch.Generator().manual_seed(len(shape) + shape[-1])
    x = (torch.randn(shape, generator=g) * 3).half()
    b = torch.randn(shape[-1], generator=g).half()
    source = "def f(x, b):\n    y = (x + b) * 0.75 - x\n    return y, y.float() * 0.5\n"
    fn = script_from_source(source)
    with fuser.enabled(True):
        got, wide = run_optimized(fn, x, b)
    want = (x + b) * 0.75 - x
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))
    assert torch.equal(wide, want.float() * 0.5)
    # A function with its own rounding (erf): eager's within float16's tolerance.
    with fuser.enabled(True):
        compare("def f(x, b):\n    return torch.nn.functional.gelu(x + b)\n", x, b, dtype=x.dtype)


def test_every_float16_value_through_a_flat_loop() -> None:
    """All 65536 float16 bit patterns and 100 more, flat, on two threads: one thread's
    range ends off a run's 256 elements."""
    x = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.float16)
    x = torch.cat([x, x[:100]])
    before = len(fuser.kernel_sources())
    fn = script_from_source("def f(x):\n    return (x * 1.0) * 1.0\n")
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with fuser.enabled(True):
            got = run_optimized(fn, x)
    finally:
        torch.set_num_threads(threads)
    [kernel] = printed_kernels(before)
    assert "fx_h2f_run(in0 + fx_h0" in kernel and "fx_f2h_run(fx_hout0, out0 + fx_h0" in kernel
    nan = x.isnan()
    assert torch.equal(got.isnan(), nan)
    assert torch.equal(got[~nan].view(torch.int16), x[~nan].view(torch.int16))


@pytest.mark.parametrize("shape", [(2, 2046), (13,), (1, 5000)], ids=str)
def test_float16_subnormals_under_flush_denormal(shape: tuple[int, ...]) -> None:
    """torch.set_flush_denormal(True) (the CPU's DAZ and FTZ) reads float subnormals as
    0: float16's subnormals (normal floats) still convert as eager converts them, in runs,
    in a run's tail, alone and in rows past the runs (element by element)."""
    subnormals = torch.arange(1, 1024, dtype=torch.int16).view(torch.float16)
    values = torch.cat([subnormals, -subnormals])
    x = values.repeat(5000 // values.numel() + 1)[: torch.Size(shape).numel()].reshape(shape)
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU cannot flush denormals")
    try:
        source = "def f(x):\n    y = x * 1.0\n    return y, y.float().sum(-1, keepdim=True)\n"
        fn = script_from_source(source)
        with fuser.enabled(True):
            got, total = run_optimized(fn, x)
        want = x * 1.0
    finally:
        torch.set_flush_denormal(False)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))
    torch.testing.assert_close(total, want.float().sum(-1, keepdim=True))
