"""The C++ kernels' own float log, log2, log10, log1p, expm1, sin, cos, tan, atan, asin,
acos, sinh, cosh, pow, atan2 and fmod (through which remainder and floor division)
(codegen/cpp_vector_math.h, cpp_trig_prelude.h). With libm's scalar calls a loop
calling one ran element by element, 2-13x slower than eager's vectorized kernels; these
widen to double and vectorize, and round to float correctly but in rare cases (fmod:
always exact)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import fuser
from helpers import (
    eager_from_source,
    every_value,
    gcc_vector_reports,
    host_compiler_is_gcc,
    run_fused,
)

ROOT = Path(__file__).resolve().parents[2]
OPS = ["log", "log2", "log10", "log1p", "expm1", "sin", "cos", "tan", "atan", "asin", "acos"]
OPS += ["sinh", "cosh"]


def source_of(op: str) -> str:
    # The multiplies by one keep the op inside a group of more than one node, and the
    # sign of a zero result (an addition of 0.0 would make -0 +0).
    return f"def f(x):\n    return torch.{op}(x * 1.0) * 1.0\n"


def special_floats() -> torch.Tensor:
    """Zeros, infinities, NaN, subnormals, the edges of each function's domain and of
    the reductions (-1 for log1p, 2^-29 and 2^-30 around log1p's series, multiples of
    pi/2 as floats near and far, 2^24 where the trigonometric reduction changes, the
    largest float)."""
    values = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-45, -1e-45]
    values += [1.1754942e-38, 1.0, -1.0, -0.99999994, -1.0000001, 2.0**-29, -(2.0**-30)]
    values += [1e-8, 0.5, 88.72, 89.0, -17.0, -104.0, 3.4028235e38, -3.4028235e38]
    values += [float(k) * 1.5707963705062866 for k in range(-8, 9)]
    values += [2.0**24, 2.0**24 - 1, 16777218.0, 1e10, 1e22, 2.0**100, 8.6e37]
    return torch.tensor(values, dtype=torch.float32)


def float_sample(count: int, seed: int) -> torch.Tensor:
    """Floats of random bits (every exponent alike), the specials, and a dense range."""
    gen = torch.Generator().manual_seed(seed)
    bits = torch.randint(-(2**31), 2**31, (count,), dtype=torch.int64, generator=gen)
    random_bits = bits.to(torch.int32).view(torch.float32)
    dense = torch.linspace(-12.0, 12.0, 4099)
    return torch.cat([random_bits, special_floats(), dense])


def ulps_between(got: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """Distance in float32 steps, on an integer line where -0 and +0 meet (NaNs: 0 where
    both are NaN, huge where one is)."""

    def line(x: torch.Tensor) -> torch.Tensor:
        i = x.view(torch.int32).to(torch.int64)
        return torch.where(i < 0, -(2**31) - i, i)

    d = (line(got) - line(want)).abs()
    both_nan = got.isnan() & want.isnan()
    one_nan = got.isnan() ^ want.isnan()
    return torch.where(both_nan, 0, torch.where(one_nan, 2**40, d))


@pytest.mark.parametrize("op", OPS)
def test_float32_matches_eager(op: str) -> None:
    x = float_sample(1 << 16, seed=len(op))
    got = run_fused(source_of(op), x)
    want = eager_from_source(source_of(op))(x)
    if op in ("sinh", "cosh"):
        want = finite_where_eager_overflows_early(x, got, want, op)
    torch.testing.assert_close(got, want, equal_nan=True)
    assert_zero_signs_match(got, want)


def finite_where_eager_overflows_early(
    x: torch.Tensor, got: torch.Tensor, want: torch.Tensor, op: str
) -> torch.Tensor:
    """Eager's vectorized sinh and cosh give inf from |x| = 88.7228 on, where float's
    e^|x| overflows, though the result stays below float's largest up to 89.4; its
    scalar loop (tensors of 16 or fewer elements) gives the finite value, as libm and we
    do. There, the float64 function rounded stands for eager's."""
    early = want.isinf() & got.isfinite()
    assert bool((x[early].abs() > 88.72).all()), x[early]
    exact = getattr(torch, op)(x.double()).float()
    return torch.where(early, exact, want)


def assert_zero_signs_match(got: torch.Tensor, want: torch.Tensor) -> None:
    """Zero results carry eager's sign (assert_close takes -0 for +0). Only where both
    are zero: eager's log1p gives +0 for subnormal x, ours x."""
    zero = (want == 0) & (got == 0)
    wrong = got[zero].signbit() != want[zero].signbit()
    assert not bool(wrong.any()), f"{int(wrong.sum())} zeros of the wrong sign"


@pytest.mark.parametrize("op", OPS)
def test_float32_is_within_one_step_of_double_rounded(op: str) -> None:
    """Against float64's function rounded to float32: never more than one step off, and
    off at all only where double's own result lies near a midpoint (rare)."""
    x = float_sample(1 << 18, seed=100 + len(op))
    got = run_fused(source_of(op).replace("1.0", "1.0 * 1.0"), x)
    want = getattr(torch, op)(x.double()).float()
    ulps = ulps_between(got, want)
    assert int(ulps.max()) <= 1, (op, x[ulps > 1][:8], got[ulps > 1][:8], want[ulps > 1][:8])
    assert int((ulps == 1).sum()) <= x.numel() // 10000, op


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16_bit_inputs_match_eager(op: str, dtype: torch.dtype) -> None:
    """Every value of each 16-bit dtype, computed in float and rounded once more: equal
    to eager's but where the float result lies exactly halfway between two 16-bit values
    (float16 sin(300): the correctly rounded float is the midpoint 1 - 2^-12 and rounds
    to even, 1.0; eager's float is a step below it and gives 0.9995)."""
    x = every_value(dtype, "cpu")
    src = source_of(op).replace("1.0", "1.0 * 1.0 * 1.0")
    got = run_fused(src, x)
    want = eager_from_source(src)(x)
    assert got.dtype == want.dtype == dtype
    if op in ("sinh", "cosh"):
        want = finite_where_eager_overflows_early(x.float(), got.float(), want.float(), op)
        want = want.to(dtype)
    same = (got.view(torch.int16) == want.view(torch.int16)) | (got.isnan() & want.isnan())
    in_float = run_fused(src, x[~same].float())
    dropped = 13 if dtype == torch.float16 else 16  # float's bits below the 16-bit type's
    midpoint = 1 << (dropped - 1)
    low = in_float.view(torch.int32) & ((1 << dropped) - 1)
    # Or a float step from the midpoint, where eager's float (SLEEF's asin is within an
    # ulp) lay on the other side and ours is the correctly rounded one.
    correctly_rounded = in_float == getattr(torch, op)(x[~same].double()).float()
    near = (low == midpoint) | (((low - midpoint).abs() == 1) & correctly_rounded)
    assert bool(near.all()), (op, x[~same][:8], got[~same][:8], want[~same][:8])
    assert int((~same).sum()) <= 4, op


def floats_nearest_multiples_of_half_pi() -> torch.Tensor:
    """Where the reduction cancels most: 16367173 * 2^72 (the float closest to a
    multiple of pi/2, its remainder about 2^-29 of pi/2) and, for every exponent from
    2^24 up, the float nearest a multiple of pi/2 among 4096 consecutive significands;
    with each one's neighbours and negatives."""
    hard = [16367173.0 * 2.0**72]
    offsets = torch.arange(4096, dtype=torch.float64)
    for exponent in range(24, 128):
        significands = 8388608.0 + 1234567.0 + offsets  # 2^23 + ...: 24-bit integers
        x = significands * 2.0 ** (exponent - 23)
        remainder = (x / (torch.pi / 2)).frac()  # float64's quotient: a guide only
        distance = torch.minimum(remainder, 1 - remainder)
        hard.append(float(x[distance.argmin()]))
    x = torch.tensor(hard, dtype=torch.float32)
    up, down = x.nextafter(torch.tensor(float("inf"))), x.nextafter(torch.tensor(0.0))
    x = torch.cat([x, up, down])
    return torch.cat([x, -x])


def test_trigonometry_of_large_arguments_against_exact_reduction() -> None:
    """Above 2^24 the reduction reads 2/pi's bits from the table: sin, cos and tan
    there against float64's (whose reduction is exact), at arguments of every exponent
    and at those nearest multiples of pi/2, where an error in the reduction shows most:
    rounded the same (no step off)."""
    exponents = torch.arange(24, 128, dtype=torch.float64)
    x = (torch.ldexp(torch.full_like(exponents, 1.2345678), exponents.to(torch.int64))).float()
    x = torch.cat([x, x.nextafter(torch.tensor(float("inf"))), -x])
    x = torch.cat([x, floats_nearest_multiples_of_half_pi()])
    for op in ("sin", "cos", "tan"):
        got = run_fused(source_of(op).replace("x * 1.0", "x * 1.0 - 0.0"), x)
        want = getattr(torch, op)(x.double()).float()
        ulps = ulps_between(got, want)
        assert int(ulps.max()) == 0, (op, x[ulps > 0][:4], got[ulps > 0][:4], want[ulps > 0][:4])


POW_SOURCE = "def f(x, y):\n    return torch.pow(x * 1.0, y * 1.0) * 1.0\n"


def pow_operands(count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every pair of the special floats (with integral, odd, half and huge exponents
    among them), then random pairs: bases of every exponent and exponents of modest
    size (most such powers neither overflow nor underflow)."""
    specials = torch.cat([special_floats(), torch.tensor([0.5, 2.5, 3.0, -3.0, 1e-3, 16777217.0])])
    base, exponent = torch.meshgrid(specials, specials, indexing="ij")
    gen = torch.Generator().manual_seed(seed)
    bits = torch.randint(-(2**31), 2**31, (count,), dtype=torch.int64, generator=gen)
    random_base = bits.to(torch.int32).view(torch.float32)
    random_exponent = (torch.rand(count, generator=gen) - 0.5) * 8
    near_one = 1 + (torch.rand(count, generator=gen) - 0.5) * 1e-3
    huge_exponent = (torch.rand(count, generator=gen) - 0.5) * 4e5
    return (
        torch.cat([base.flatten(), random_base, near_one]),
        torch.cat([exponent.flatten(), random_exponent, huge_exponent]),
    )


def test_pow_float32_matches_eager() -> None:
    x, y = pow_operands(1 << 16, seed=3)
    got = run_fused(POW_SOURCE, x, y)
    want = eager_from_source(POW_SOURCE)(x, y)
    torch.testing.assert_close(got, want, equal_nan=True)
    assert_zero_signs_match(got, want)


def test_pow_float32_is_within_one_step_of_double_rounded() -> None:
    x, y = pow_operands(1 << 18, seed=4)
    got = run_fused(POW_SOURCE.replace("1.0", "1.0 * 1.0"), x, y)
    want = torch.pow(x.double(), y.double()).float()
    ulps = ulps_between(got, want)
    assert int(ulps.max()) <= 1, (x[ulps > 1][:8], y[ulps > 1][:8], got[ulps > 1][:8])
    assert int((ulps == 1).sum()) <= x.numel() // 10000


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("exponent", [1.7, -2.5, 0.25, 0.5004, -0.5004, 0.5, -0.5, 2.001])
def test_pow_of_every_16_bit_value_matches_eager(dtype: torch.dtype, exponent: float) -> None:
    """Bit for bit. Eager reads a scalar exponent in the tensor's type (float16
    x ** 1.7 is x ** 1.7002, bfloat16's x ** 1.703125); read as a float it put results
    up to 23 steps from eager's. It takes sqrt and rsqrt only for an exponent given as
    +-0.5 (bfloat16 x ** 0.5004 is pow(x, 0.5): +0 at -0, inf at -inf), the square for
    one that rounds to 2 (bfloat16 2.001)."""
    x = every_value(dtype, "cpu")
    src = f"def f(x):\n    return torch.pow(x * 1.0 * 1.0, {exponent}) * 1.0\n"
    got = run_fused(src, x)
    want = eager_from_source(src)(x)
    assert got.dtype == want.dtype == dtype
    same = (got.view(torch.int16) == want.view(torch.int16)) | (got.isnan() & want.isnan())
    assert bool(same.all()), (x[~same][:8], got[~same][:8], want[~same][:8])


# Functions reached through another op, with the prelude function each must call.
COMPOSED = {
    "pow": "torch.pow(x, y)",
    "softplus": "torch.nn.functional.softplus(x)",
    "mish": "torch.nn.functional.mish(x)",
    "atan2": "torch.atan2(x, y)",
    "fmod": "torch.fmod(x, y)",
    "remainder": "torch.remainder(x, y)",
    "floor_divide": "torch.floor_divide(x, y)",
}
FUNCTION = {"softplus": "log1p", "mish": "log1p", "remainder": "fmod", "floor_divide": "fmod"}


@pytest.mark.skipif(not host_compiler_is_gcc(), reason="reads GCC's -fopt-info reports")
@pytest.mark.parametrize("calling", [*OPS, *COMPOSED, "all"])
def test_a_loop_calling_the_functions_vectorizes(calling: str) -> None:
    """Each alone and all in one loop (where GCC once left the loop scalar for the
    branches of && in pow), and log1p after exp as softplus and mish call them (where a
    select in exp once did). On CPUs GCC does not know its tuning turns gathers off:
    the trigonometric table's loads must vectorize without them."""
    names = [*OPS, *COMPOSED] if calling == "all" else [calling]
    calls = [f"torch.{op}(x * 0.75)" for op in names if op not in COMPOSED]
    calls += [COMPOSED[op] for op in names if op in COMPOSED]
    before = len(fuser.kernel_sources())
    run_fused(
        f"def f(x, y):\n    return {' + '.join(calls)} + y\n", torch.rand(4096), torch.rand(4096)
    )
    sources = [s for s in fuser.kernel_sources()[before:] if "__global__" not in s]
    assert sources, "no CPU kernel was compiled"
    for source in sources:
        assert all(f"fx_{FUNCTION.get(op, op)}f(" in source for op in names)
        lines = source.splitlines()
        loop = next(i for i, line in enumerate(lines) if "i = fx_begin; i < fx_end" in line)
        reports = gcc_vector_reports(source, "-fopt-info-vec-optimized")
        assert any(re.match(rf"kernel\.cpp:{loop + 1}:.*loop vectorized", r) for r in reports)


def test_kernels_without_trigonometry_leave_out_its_table() -> None:
    before = len(fuser.kernel_sources())
    run_fused(source_of("log").replace("1.0", "0.5625"), torch.rand(64))
    run_fused(source_of("sin").replace("1.0", "0.5625"), torch.rand(64))
    sources = fuser.kernel_sources()[before:]
    log_kernel = next(s for s in sources if "fx_logf(" in s and "__global__" not in s)
    sin_kernel = next(s for s in sources if "fx_sinf(" in s and "__global__" not in s)
    assert "fx_two_over_pi" not in log_kernel and "fx_two_over_pi" in sin_kernel


def test_the_table_is_what_its_generator_prints() -> None:
    table = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "two_over_pi_table.py")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert table.count("\n") == 106
    assert table in (ROOT / "csrc" / "codegen" / "cpp_trig_prelude.h").read_text()


def test_double_tensors_match_eager() -> None:
    """float64 kernels still call libm (the vector forms are float's)."""
    x = float_sample(1 << 12, seed=7).double()
    got = run_fused(source_of("sin"), x)
    want = eager_from_source(source_of("sin"))(x)
    torch.testing.assert_close(got, want, equal_nan=True)
    base, exponent = (t.double() for t in pow_operands(1 << 12, seed=8))
    got = run_fused(POW_SOURCE, base, exponent)
    want = eager_from_source(POW_SOURCE)(base, exponent)
    torch.testing.assert_close(got, want, equal_nan=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_pow_reads_a_scalar_exponent_in_the_16_bit_type_on_cuda(dtype: torch.dtype) -> None:
    """Eager's CUDA kernel reads the exponent in the tensor's type as its CPU one does;
    both sides call CUDA's powf, so results agree but for rare one-step differences
    (read as a float, 1.7 put a fifth of float16's results one or two steps off)."""
    x = every_value(dtype, "cuda")
    x = x[x.isfinite() & (x > 0)]
    src = "def f(x):\n    return torch.pow(x * 1.0 * 1.0, 1.7) * 1.0\n"
    got = run_fused(src, x)
    want = eager_from_source(src)(x)
    finite = want.isfinite()
    steps = (got.view(torch.int16).int() - want.view(torch.int16).int()).abs()[finite]
    assert int(steps.max()) <= 1
    assert int((steps == 1).sum()) <= x.numel() // 1000


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_pow_of_an_exponent_given_at_run_time_matches_eager(dtype: torch.dtype) -> None:
    """A `float` argument as the exponent: rounded to the tensor's type as a constant
    is (bfloat16 x ** 2.001 at x = 1e18 was 4% off eager's when read as a float), and
    +-0.5 as eager's sqrt and rsqrt give -0 and -inf (pow would give +0 and +inf)."""
    x = float_sample(1 << 12, seed=9).to(dtype)
    # Eager's scalar loop takes the elements past its last full vector and rounds some
    # results otherwise (bfloat16 rsqrt through a rounded sqrt: 11.75 ** -0.5 is 0.2930
    # there, 0.2910 in its vector loop and ours): whole vectors only.
    x = x[: x.numel() // 64 * 64]
    src = "def f(x, s: float):\n    return torch.pow(x * 1.0, s) * 1.0\n"
    for s in (2.001, 1.7, 0.5, -0.5, -1.0, 3.0):
        got = run_fused(src, x, s)
        want = eager_from_source(src)(x, s)
        torch.testing.assert_close(got, want, equal_nan=True, msg=lambda m, s=s: f"{s}: {m}")
        assert_zero_signs_match(got, want)
        if dtype != torch.float32 and s != 3.0:  # 16-bit results as eager rounds them
            same = (got.view(torch.int16) == want.view(torch.int16)) | (got.isnan() & want.isnan())
            assert bool(same.all()), (s, x[~same][:4], got[~same][:4], want[~same][:4])


TWO_ARGUMENT = ["atan2", "fmod", "remainder", "floor_divide"]


def two_argument_source(op: str) -> str:
    return f"def f(x, y):\n    return torch.{op}(x * 1.0, y * 1.0) * 1.0\n"


def quotient_operands(count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every pair of the special floats; random bits against random bits (quotients of
    every size and subnormal divisors); the largest quotients, up to 2^277: large
    dividends over subnormal divisors with random mantissas (fmod takes all ten of its
    steps there; nine leave some wrong); and small integers and decimals, whose quotients
    are near integers (where a remainder's last step turns)."""
    specials = torch.cat([special_floats(), torch.tensor([2.5, 3.0, -3.0, 0.1, 7.0])])
    x, y = torch.meshgrid(specials, specials, indexing="ij")
    gen = torch.Generator().manual_seed(seed)
    bits = torch.randint(-(2**31), 2**31, (2, count), dtype=torch.int64, generator=gen)
    random_x, random_y = bits.to(torch.int32).view(torch.float32)
    mantissas = torch.randint(1, 1 << 23, (2, count), dtype=torch.int64, generator=gen)
    exponents = torch.randint(224, 255, (count,), dtype=torch.int64, generator=gen)
    signs = torch.randint(0, 2, (2, count), dtype=torch.int64, generator=gen) << 31
    large_x = (signs[0] | exponents << 23 | mantissas[0]).to(torch.int32).view(torch.float32)
    # Subnormal divisors of every width down to a few bits (odd, so not powers of two).
    widths = torch.randint(1, 24, (count,), dtype=torch.int64, generator=gen)
    subnormal = (mantissas[1] >> (23 - widths)) | 1
    subnormal_y = (signs[1] | subnormal).to(torch.int32).view(torch.float32)
    small_x = torch.randint(-1000, 1001, (count,), generator=gen).float() / 10
    small_y = torch.randint(-20, 21, (count,), generator=gen).float() / 4
    return (
        torch.cat([x.flatten(), random_x, large_x, small_x]),
        torch.cat([y.flatten(), random_y, subnormal_y, small_y]),
    )


@pytest.mark.parametrize("op", TWO_ARGUMENT)
def test_two_argument_float32_matches_eager(op: str) -> None:
    """fmod is exact, so remainder and floor division give eager's bits (any NaN for
    any NaN); atan2 within float tolerance, with eager's zeros. Eager's vectorized fmod
    (SLEEF's) gives NaN where |x / y| passes float's largest value; the exact value there
    (libm's, eager's scalar loop's and ours) stands for it."""
    x, y = quotient_operands(1 << 16, seed=len(op))
    got = run_fused(two_argument_source(op), x, y)
    want = eager_from_source(two_argument_source(op))(x, y)
    if op in ("fmod", "remainder"):
        exact = getattr(torch, op)(x.double(), y.double()).float()
        eager_lost = want.isnan() & exact.isfinite()
        assert bool(((x.double() / y.double()).abs()[eager_lost] > 3.4e38).all())
        want = torch.where(eager_lost, exact, want)
    assert_zero_signs_match(got, want)
    if op == "atan2":
        torch.testing.assert_close(got, want, equal_nan=True)
        return
    same = (got.view(torch.int32) == want.view(torch.int32)) | (got.isnan() & want.isnan())
    assert bool(same.all()), (op, x[~same][:4], y[~same][:4], got[~same][:4], want[~same][:4])


@pytest.mark.parametrize("op", ["atan2", "fmod"])
def test_two_argument_float32_against_double(op: str) -> None:
    """fmod equal to float64's (both exact), atan2 within one step of float64's rounded."""
    x, y = quotient_operands(1 << 18, seed=50 + len(op))
    got = run_fused(two_argument_source(op), x, y)
    want = getattr(torch, op)(x.double(), y.double()).float()
    ulps = ulps_between(got, want)
    worst = 0 if op == "fmod" else 1
    assert int(ulps.max()) <= worst, (op, x[ulps > worst][:4], y[ulps > worst][:4])
    assert int((ulps == 1).sum()) <= x.numel() // 10000, op


@pytest.mark.parametrize("op", ["remainder", "floor_divide"])
def test_float64_remainder_and_floor_divide_match_eager(op: str) -> None:
    """float64 goes through the same shared helpers as float32, with libm's fmod: their
    test of a remainder's sign against the divisor's must hold where a product of the two
    would underflow (1e-200 against -3e-200), and at subnormals. Quotients stay within
    double's range: past it eager's vectorized fmod gives NaN, as for float."""
    values = [1e-200, -3e-200, 3e-160, -1e-170, 5e-324, -1e-300, 2.5e-310, -0.0, 1e-150]
    tiny = torch.tensor(values, dtype=torch.float64)
    x, y = (t.flatten() for t in torch.meshgrid(tiny, tiny, indexing="ij"))
    gen = torch.Generator().manual_seed(7)
    bits = torch.randint(0, 2**62, (2, 1 << 14), dtype=torch.int64, generator=gen)
    # Exponents within 2^-256..2^256.
    bits = (bits & ~(0x7FF << 52)) | (torch.randint(767, 1280, bits.shape, generator=gen) << 52)
    random_x, random_y = bits.view(torch.float64)
    signs = torch.randint(0, 2, (2, 1 << 14), generator=gen) * 2 - 1
    x = torch.cat([x, random_x * signs[0]])
    y = torch.cat([y, random_y * signs[1]])
    got = run_fused(two_argument_source(op), x, y)
    want = eager_from_source(two_argument_source(op))(x, y)
    assert got.dtype == want.dtype == torch.float64
    same = (got.view(torch.int64) == want.view(torch.int64)) | (got.isnan() & want.isnan())
    assert bool(same.all()), (x[~same][:4], y[~same][:4], got[~same][:4], want[~same][:4])
