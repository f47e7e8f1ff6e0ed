"""Parity of every operator of the fusible table (csrc/ops/) with eager PyTorch.

Each case is a small function in TorchScript source. It runs in eager Python for the
reference, then scripted with the fuser on, three times (call 1 profiles, call 2
optimizes, call 3 runs the optimized graph); the fused result must equal eager's
(bitwise with the same dtype for integer and bool results, assert_close for floats), the
optimized graph must hold a fuser::FusionGroup and generated kernels must have run. When
eager raises for the inputs, the scripted function must raise too. The `fused` fixture
keeps single-node groups, so a single operator forms a group of its own.

FUSER_TEST_PARITY_ONLY=1 skips the fusion assertions: with the fuser inactive it checks
that every case scripts and that TorchScript itself agrees with eager.
"""

from __future__ import annotations

import itertools
import os
import textwrap
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Optional

import pytest
import torch

import fuser

pytestmark = pytest.mark.usefixtures("fused")
PARITY_ONLY = os.environ.get("FUSER_TEST_PARITY_ONLY") == "1"
# FUSER_TEST_DEVICE=cuda runs every case on the GPU (the device machine's run).
DEVICE = os.environ.get("FUSER_TEST_DEVICE", "cpu")

F32, F64, F16, BF16 = torch.float32, torch.float64, torch.float16, torch.bfloat16
I8, I16, I32, I64, U8, B = (
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.bool,
)
FLOATS = [F32, F64, F16, BF16]
INTS = [I8, I16, I32, I64, U8]
ALL = FLOATS + INTS + [B]
MIXED_PAIRS = [
    (I32, F32),
    (U8, I8),
    (B, I64),
    (F16, F32),
    (BF16, F16),
    (I64, F64),
    (B, F16),
    (F16, I32),
    (U8, B),
    (I16, I64),
    (BF16, F64),
]
PAIRS = [(d, d) for d in ALL] + MIXED_PAIRS

# Half types are computed in float and rounded once: a few units in the last place.
TOLERANCE = {F16: {"rtol": 2e-3, "atol": 1e-3}, BF16: {"rtol": 1.6e-2, "atol": 1e-2}}


# ---- inputs ---------------------------------------------------------------------------


def make(
    dtype: torch.dtype,
    shape: Sequence[int] = (4, 6),
    domain: str = "any",
    seed: int = 0,
) -> torch.Tensor:
    """A tensor of `dtype` with values in `domain`:
    any: [-4, 4], half of them multiples of 0.5 (ties for round, equal pairs for ==);
    positive: (0.1, 4]; unit: (-0.95, 0.95); nonzero: no zeros (divisors);
    exponent: small exponents ([0, 3] for integers, [-2, 2] for floats);
    specials: `any` with nan, inf, -inf, -0.0 among the first elements of floats."""
    g = torch.Generator().manual_seed(seed)
    n = 1
    for s in shape:
        n *= s
    if dtype == B:
        return (torch.rand(n, generator=g) > 0.5).reshape(shape)
    if dtype.is_floating_point:
        x = torch.rand(n, generator=g, dtype=F64)
        if domain == "positive":
            x = 0.1 + 3.9 * x
        elif domain == "unit":
            x = 1.9 * x - 0.95
        elif domain == "exponent":
            x = 4 * x - 2
        else:
            x = 8 * x - 4
            half = torch.arange(n) % 2 == 0
            x = torch.where(half, torch.round(x * 2) / 2, x)
            if domain == "nonzero":
                x = torch.where(x == 0, torch.full_like(x, 1.5), x)
        if domain == "specials":
            specials = torch.tensor(
                [float("nan"), float("inf"), -float("inf"), -0.0, 0.0], dtype=F64
            )
            x[: min(n, len(specials))] = specials[: min(n, len(specials))]
        return x.to(dtype).reshape(shape)
    lo, hi = (0, 10) if dtype == U8 else (-9, 10)
    if domain == "positive":
        lo, hi = 1, 10
    elif domain == "exponent":
        lo, hi = 0, 4
    x = torch.randint(lo, hi, (n,), generator=g, dtype=I64)
    if domain == "nonzero":
        x = torch.where(x == 0, torch.ones_like(x), x)
    return x.to(dtype).reshape(shape)


# ---- the harness ----------------------------------------------------------------------


def _fusion_groups(block: Any) -> Iterator[Any]:
    for node in block.nodes():
        if node.kind() == "fuser::FusionGroup":
            yield node
        for sub in node.blocks():
            yield from _fusion_groups(sub)


def _clone(x: Any) -> Any:
    return x.to(DEVICE, copy=True) if isinstance(x, torch.Tensor) else x


def assert_same(actual: Any, expected: Any) -> None:
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=False):
            assert_same(a, e)
        return
    assert isinstance(actual, torch.Tensor), f"expected a tensor, got {type(actual)}"
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != eager {expected.dtype}"
    assert actual.shape == expected.shape, f"shape {actual.shape} != eager {expected.shape}"
    assert actual.device == expected.device
    if expected.dtype.is_floating_point:
        torch.testing.assert_close(
            actual, expected, equal_nan=True, **TOLERANCE.get(expected.dtype, {})
        )
    else:
        assert torch.equal(actual, expected), f"\nfused: {actual}\neager: {expected}"


def _script(source: str) -> Callable[..., Any]:
    # A fresh compilation unit per case: torch.jit.script caches by function object.
    return torch.jit.CompilationUnit(source).f


def check(body: str, *args: Any, params: str | None = None, fused: bool = True) -> None:
    """Runs `def f(<params>): <body>` eagerly and scripted (three calls) and compares.
    `params` defaults to a, b, c, ... (tensors); give it to annotate scalar parameters."""
    if params is None:
        params = ", ".join("abcdefgh"[: len(args)])
    source = f"def f({params}):\n" + textwrap.indent(textwrap.dedent(body).strip(), "    ") + "\n"
    namespace: dict[str, Any] = {"torch": torch, "Optional": Optional}
    exec(source, namespace)  # noqa: S102 - the reference is the same source, run eagerly
    try:
        expected = namespace["f"](*[_clone(a) for a in args])
    except (RuntimeError, TypeError):
        # Eager raised (its ZeroDivisionError is a RuntimeError): so must the scripted
        # function, at run time; a source that fails to script is a bug of the test.
        scripted = _script(source)
        with pytest.raises((RuntimeError, torch.jit.Error)):
            for _ in range(3):
                scripted(*[_clone(a) for a in args])
        return
    scripted = _script(source)
    before = fuser.stats()
    for _ in range(3):
        actual = scripted(*[_clone(a) for a in args])
    launches = fuser.stats()["kernel_launches"] - before["kernel_launches"]
    guard_failures = fuser.stats()["guard_failures"] - before["guard_failures"]
    outputs = _tensors(actual)
    empty = bool(outputs) and all(t.numel() == 0 for t in outputs)
    graph = torch.jit.last_executed_optimized_graph()
    assert_same(actual, expected)
    groups = list(_fusion_groups(graph))
    if PARITY_ONLY:
        return
    if fused:
        assert groups, f"no fuser::FusionGroup in the optimized graph of\n{source}\n{graph}"
        if empty:
            # Nothing to compute: the group runs without a launch, but not as a fallback.
            assert guard_failures == 0, f"the type guard failed for\n{source}\n{graph}"
        else:
            assert launches > 0, f"no generated kernel ran for\n{source}\n{graph}"
        # conftest turns on FUSER_CROSS_COMPILE where NVRTC exists: the CUDA form of
        # every kernel above was compiled for sm_90 too, and must have compiled
        assert fuser.stats()["cuda_cross_compile_failures"] == 0, source
    else:
        assert not groups, f"unexpected fuser::FusionGroup for\n{source}\n{graph}"


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def ids(values: Sequence[Any]) -> list[str]:
    return [str(v).replace("torch.", "") for v in values]


# ---- unary ----------------------------------------------------------------------------

# op -> (expression of a, input domain). Integer inputs give float32 (int-to-float ops).
UNARY_FLOAT = {
    "sqrt": ("torch.sqrt(a)", "positive"),
    "rsqrt": ("torch.rsqrt(a)", "positive"),
    "exp": ("torch.exp(a)", "any"),
    "exp2": ("torch.exp2(a)", "any"),
    "expm1": ("torch.expm1(a)", "any"),
    "log": ("torch.log(a)", "positive"),
    "log1p": ("torch.log1p(a)", "positive"),
    "log2": ("torch.log2(a)", "positive"),
    "log10": ("torch.log10(a)", "positive"),
    "sin": ("torch.sin(a)", "any"),
    "cos": ("torch.cos(a)", "any"),
    "tan": ("torch.tan(a)", "unit"),
    "asin": ("torch.asin(a)", "unit"),
    "acos": ("torch.acos(a)", "unit"),
    "atan": ("torch.atan(a)", "any"),
    "sinh": ("torch.sinh(a)", "any"),
    "cosh": ("torch.cosh(a)", "any"),
    "tanh": ("torch.tanh(a)", "any"),
    "erf": ("torch.erf(a)", "any"),
    "erfc": ("torch.erfc(a)", "any"),
    "sigmoid": ("torch.sigmoid(a)", "any"),
    "reciprocal": ("torch.reciprocal(a)", "nonzero"),
}

# op -> expression; the dtype is kept (or eager raises).
UNARY_KEEP = {
    "abs": "torch.abs(a)",
    "neg": "-a",
    "floor": "torch.floor(a)",
    "ceil": "torch.ceil(a)",
    "round": "torch.round(a)",
    "round_decimals": "torch.round(a, decimals=1)",
    "round_negative_decimals": "torch.round(a * 10, decimals=-1)",
    "trunc": "torch.trunc(a)",
    "frac": "torch.frac(a)",
    "sign": "torch.sign(a)",
    "sgn": "torch.sgn(a)",
    "relu": "torch.relu(a)",
    "relu6": "torch.nn.functional.relu6(a)",
    "square": "torch.square(a)",
    "bitwise_not": "~a",
    "logical_not": "torch.logical_not(a)",
    "isnan": "torch.isnan(a)",
}


@pytest.mark.parametrize("dtype", ALL, ids=ids(ALL))
@pytest.mark.parametrize("op", list(UNARY_FLOAT))
def test_unary_int_to_float(op: str, dtype: torch.dtype) -> None:
    expr, domain = UNARY_FLOAT[op]
    check(f"return {expr}", make(dtype, domain=domain))


@pytest.mark.parametrize("dtype", ALL, ids=ids(ALL))
@pytest.mark.parametrize("op", list(UNARY_KEEP))
def test_unary_keep_dtype(op: str, dtype: torch.dtype) -> None:
    # abs of bool: eager raises on CPU, returns the input on CUDA; never fused.
    fused = not (op == "abs" and dtype == B)
    check(f"return {UNARY_KEEP[op]}", make(dtype), fused=fused)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize(
    "op",
    [
        "abs",
        "neg",
        "floor",
        "ceil",
        "round",
        "trunc",
        "frac",
        "sign",
        "relu",
        "relu6",
        "square",
        "logical_not",
        "isnan",
    ],
)
def test_unary_special_values(op: str, dtype: torch.dtype) -> None:
    check(f"return {UNARY_KEEP[op]}", make(dtype, domain="specials"))


# ---- activations ----------------------------------------------------------------------

ACTIVATIONS = {
    "leaky_relu": "torch.nn.functional.leaky_relu(a, 0.2)",
    "leaky_relu_default": "torch.nn.functional.leaky_relu(a)",
    "elu": "torch.nn.functional.elu(a)",
    "elu_alpha": "torch.nn.functional.elu(a, 1.5)",
    "elu_scales": "torch.ops.aten.elu(a, 2.0, 3.0, 0.5)",
    "gelu": "torch.nn.functional.gelu(a)",
    "gelu_tanh": "torch.nn.functional.gelu(a, approximate='tanh')",
    "silu": "torch.nn.functional.silu(a)",
    "mish": "torch.nn.functional.mish(a)",
    "hardtanh": "torch.nn.functional.hardtanh(a)",
    "hardtanh_bounds": "torch.nn.functional.hardtanh(a, -0.5, 2.0)",
    "hardsigmoid": "torch.nn.functional.hardsigmoid(a)",
    "hardswish": "torch.nn.functional.hardswish(a)",
    "softplus": "torch.nn.functional.softplus(a)",
    "softplus_params": "torch.nn.functional.softplus(a, 2.0, 3.0)",
    "sigmoid": "torch.sigmoid(a)",
    "tanh": "torch.tanh(a)",
}


@pytest.mark.parametrize("dtype", ALL, ids=ids(ALL))
@pytest.mark.parametrize("op", list(ACTIVATIONS))
def test_activation(op: str, dtype: torch.dtype) -> None:
    check(f"return {ACTIVATIONS[op]}", make(dtype))


@pytest.mark.parametrize("dtype", [F32, F16], ids=ids([F32, F16]))
@pytest.mark.parametrize("op", list(ACTIVATIONS))
def test_activation_special_values(op: str, dtype: torch.dtype) -> None:
    body, x = f"return {ACTIVATIONS[op]}", make(dtype, domain="specials")
    if op == "gelu" and DEVICE == "cpu":
        # Eager's CPU gelu of float tensors runs through oneDNN where this machine's
        # oneDNN takes it, and oneDNN gives NaN for +inf; ATen's own kernel gives inf, as
        # eager on CUDA does. The reference is ATen's kernel on every machine.
        with torch.backends.mkldnn.flags(enabled=False):
            check(body, x)
        return
    check(body, x)


@pytest.mark.parametrize("dtype", [F32, BF16], ids=ids([F32, BF16]))
@pytest.mark.parametrize("body", ["torch.tanh(a)", "torch.erf(a)"], ids=["tanh", "erf"])
def test_odd_functions_keep_the_sign_of_zero(body: str, dtype: torch.dtype) -> None:
    """tanh and erf are computed from |x| with the sign put back: -0.0 stays -0.0 as in
    eager (the CPU's erf once gave +0.0), on either side of tanh's switch to its series at
    |x| = 0.0625."""
    x = torch.tensor(
        [-0.0, 0.0, 1e-30, -1e-30, 0.0624, -0.0624, 0.0625, -0.0625, 3.0, -3.0] * 4,
        dtype=dtype,
        device=DEVICE,
    )
    check(f"return {body}", x)
    scripted = _script(f"def f(a):\n    return {body}\n")
    for _ in range(3):
        got = scripted(x.clone())
    want = eval(body, {"torch": torch, "a": x})  # noqa: S307 - the same expression, eager
    assert torch.equal(torch.signbit(got), torch.signbit(want)), (got, want)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_backward(approximate: str, dtype: torch.dtype) -> None:
    """Autodiff's backward of gelu: the gradient times gelu's derivative at self."""
    body = f"return torch.ops.aten.gelu_backward(a, b, approximate={approximate!r})"
    check(body, make(dtype), make(dtype, seed=1))
    if dtype == F32:
        with torch.backends.mkldnn.flags(enabled=False):  # ATen's kernel, as for gelu
            check(body, make(dtype), make(dtype, domain="specials", seed=2))
        check(body, make(dtype), torch.tensor([-100.0, -30.0, -5.0, 0.0, 5.0, 30.0]).expand(4, 6))


def test_gelu_backward_of_mixed_dtypes_is_not_fused() -> None:
    check(
        "return torch.ops.aten.gelu_backward(a, b)",
        make(F32),
        make(F64, seed=1),
        fused=False,
    )


def test_activation_large_inputs() -> None:
    # The branches of softplus / elu / silu / mish away from zero.
    x = torch.tensor([-100.0, -30.0, -5.0, 0.0, 5.0, 19.0, 21.0, 30.0, 100.0])
    for expr in ACTIVATIONS.values():
        check(f"return {expr}", x)


def test_activation_runtime_scalars() -> None:
    x = make(F32)
    check("return torch.nn.functional.leaky_relu(a, s)", x, 0.3, params="a, s: float")
    check(
        "return torch.nn.functional.hardtanh(a, lo, hi)",
        x,
        -1.5,
        0.5,
        params="a, lo: float, hi: float",
    )
    check(
        "return torch.nn.functional.softplus(a, beta, t)",
        x,
        2.0,
        1.0,
        params="a, beta: float, t: float",
    )
    check("return torch.nn.functional.elu(a, alpha)", x, 0.7, params="a, alpha: float")


# ---- binary ---------------------------------------------------------------------------

# op -> (expression of a and b, domain of b)
BINARY = {
    "add": ("a + b", "any"),
    "add_alpha": ("torch.add(a, b, alpha=2)", "any"),
    "sub": ("a - b", "any"),
    "sub_alpha": ("torch.sub(a, b, alpha=3)", "any"),
    "rsub": ("torch.rsub(a, b)", "any"),
    "mul": ("a * b", "any"),
    "div": ("a / b", "nonzero"),
    "true_divide": ("torch.true_divide(a, b)", "nonzero"),
    "div_trunc": ("torch.div(a, b, rounding_mode='trunc')", "nonzero"),
    "div_floor": ("torch.div(a, b, rounding_mode='floor')", "nonzero"),
    "div_none": ("torch.div(a, b, rounding_mode=None)", "nonzero"),
    "floor_divide": ("a // b", "nonzero"),
    "remainder": ("a % b", "nonzero"),
    "fmod": ("torch.fmod(a, b)", "nonzero"),
    "pow": ("torch.pow(a, b)", "exponent"),
    "atan2": ("torch.atan2(a, b)", "any"),
    "maximum": ("torch.maximum(a, b)", "any"),
    "minimum": ("torch.minimum(a, b)", "any"),
    "max_other": ("torch.max(a, b)", "any"),
    "min_other": ("torch.min(a, b)", "any"),
    "eq": ("a == b", "any"),
    "ne": ("a != b", "any"),
    "lt": ("a < b", "any"),
    "le": ("a <= b", "any"),
    "gt": ("a > b", "any"),
    "ge": ("a >= b", "any"),
    "logical_and": ("torch.logical_and(a, b)", "any"),
    "logical_or": ("torch.logical_or(a, b)", "any"),
    "logical_xor": ("torch.logical_xor(a, b)", "any"),
    "and": ("a & b", "any"),
    "or": ("a | b", "any"),
    "xor": ("a ^ b", "any"),
    "bitwise_and": ("torch.bitwise_and(a, b)", "any"),
    "bitwise_or": ("torch.bitwise_or(a, b)", "any"),
    "bitwise_xor": ("torch.bitwise_xor(a, b)", "any"),
    "clamp_min_tensor": ("torch.clamp_min(a, b)", "any"),
    "clamp_max_tensor": ("torch.clamp_max(a, b)", "any"),
    "type_as": ("a.type_as(b)", "any"),
    "to_other": ("a.to(b)", "any"),
    "where_mask": ("torch.where(b > 0, a, b)", "any"),
}


def _base_domain(op: str) -> str:
    return "positive" if op == "pow" else "any"


@pytest.mark.parametrize("dtypes", PAIRS, ids=["-".join(ids(p)) for p in PAIRS])
@pytest.mark.parametrize("op", list(BINARY))
def test_binary(op: str, dtypes: tuple[torch.dtype, torch.dtype]) -> None:
    expr, domain = BINARY[op]
    if op in ("type_as", "to_other") and dtypes[0] == dtypes[1]:
        pytest.skip("same dtype: eager returns the input itself (an alias)")
    a = make(dtypes[0], domain=_base_domain(op), seed=1)
    b = make(dtypes[1], domain=domain, seed=2)
    check(f"return {expr}", a, b)


@pytest.mark.parametrize("dtype", [F32, F64, F16], ids=ids([F32, F64, F16]))
@pytest.mark.parametrize(
    "op",
    [
        "add",
        "mul",
        "div",
        "div_floor",
        "div_trunc",
        "remainder",
        "fmod",
        "maximum",
        "minimum",
        "eq",
        "lt",
        "ge",
        "logical_and",
        "clamp_min_tensor",
        "clamp_max_tensor",
    ],
)
def test_binary_special_values(op: str, dtype: torch.dtype) -> None:
    a = make(dtype, domain="specials", seed=1)
    b = make(dtype, domain="specials", seed=2).flip(0)  # nan meets numbers and vice versa
    check(f"return {BINARY[op][0]}", a, b)


def test_float_division_by_zero() -> None:
    a = torch.tensor([5.0, -5.0, 0.0, 1.0, -0.0])
    b = torch.tensor([0.0, 0.0, 0.0, -0.0, 0.0])
    for op in ["div", "div_floor", "div_trunc", "remainder", "fmod", "floor_divide"]:
        check(f"return {BINARY[op][0]}", a, b)


def test_python_floor_division_of_floats() -> None:
    # 1 // 0.1 is 9.0 in Python and eager, though floor(1 / 0.1) is 10.
    a = torch.tensor([1.0, -1.0, 7.5, -7.5, 0.3, 5.0], dtype=F64)
    b = torch.tensor([0.1, 0.1, 2.5, 2.5, 0.1, -0.3], dtype=F64)
    check("return a // b", a, b)
    check("return torch.div(a, b, rounding_mode='floor')", a.float(), b.float())
    check("return torch.remainder(a, b)", a, b)


def test_integer_division_signs() -> None:
    a = torch.tensor([7, -7, 7, -7, 0, -128, 127], dtype=I8)
    b = torch.tensor([2, 2, -2, -2, 3, 3, -1], dtype=I8)
    for op in ["div_trunc", "div_floor", "floor_divide", "remainder", "fmod", "div"]:
        check(f"return {BINARY[op][0]}", a, b)
        check(f"return {BINARY[op][0]}", a.to(I64), b.to(I64))


def test_integer_overflow_wraps() -> None:
    a = torch.tensor([100, -100, 127, -128], dtype=I8)
    check("return a + a", a)
    check("return a * 3", a)
    check("return -a", a)
    check("return torch.abs(a)", a)
    u = torch.tensor([0, 1, 200, 255], dtype=U8)
    check("return -a", u)
    check("return a + 100", u)
    check("return a - 3", u)


def test_integer_pow() -> None:
    a = torch.tensor([0, 1, -1, 2, -2, 3, 7], dtype=I64)
    e = torch.tensor([3, -1, -3, -1, 5, 0, 20], dtype=I64)
    check("return torch.pow(a, b)", a, e)  # negative exponents: 1, +-1 or 0, as eager
    check("return a ** 2", a)
    check("return a ** 3", a.to(I32))
    check("return a ** 5", a.to(I16))
    check("return 2 ** a", torch.tensor([0, 1, 5, 10], dtype=I32))
    check("return a ** -1", a)  # eager raises


# ---- tensor and scalar ----------------------------------------------------------------

TENSOR_SCALAR = {
    "add_float": "a + 2.5",
    "add_int": "a + 2",
    "radd": "3 + a",
    "sub_float": "a - 1.5",
    "rsub_int": "2 - a",
    "mul_float": "a * 0.1",
    "mul_int": "a * 3",
    "div_float": "a / 0.3",
    "div_int": "a / 3",
    "floordiv": "a // 3",
    "floordiv_float": "a // 0.7",
    "mod": "a % 3",
    "mod_float": "a % 0.7",
    "rmod": "torch.remainder(5, a)",
    "fmod": "torch.fmod(a, 3)",
    "fmod_float": "torch.fmod(a, 0.7)",
    "div_trunc": "torch.div(a, 3, rounding_mode='trunc')",
    "div_floor_float": "torch.div(a, 0.7, rounding_mode='floor')",
    "pow2": "a ** 2",
    "pow3": "a ** 3",
    "pow_half": "a ** 0.5",
    "pow_float": "a ** 1.7",
    "pow_m1": "a ** -1",
    "pow_m2": "a ** -2.0",
    "pow_m_half": "a ** -0.5",
    "rpow": "2 ** a",
    "rpow_float": "2.5 ** a",
    "lt_float": "a < 0.1",
    "eq_float": "a == 0.5",
    "ge_int": "a >= 2",
    "ne_int": "a != 0",
    "gt_neg": "a > -1",
    "le_float": "a <= 2.7",
    "and_int": "a & 3",
    "or_int": "a | 4",
    "xor_int": "a ^ 1",
    "rand_int": "torch.bitwise_and(6, a)",
    "add_alpha": "torch.add(a, 2, alpha=3)",
    "sub_alpha_float": "torch.sub(a, 1.5, alpha=2.5)",
    "rsub_alpha": "torch.rsub(a, 2, alpha=2)",
    "clamp": "torch.clamp(a, -1, 2)",
    "clamp_float": "torch.clamp(a, -1.5, 2.5)",
    "clamp_min": "torch.clamp(a, min=0.5)",
    "clamp_max": "torch.clamp(a, max=1)",
    "clip": "torch.clip(a, -2, 2)",
    "clamp_min_op": "torch.clamp_min(a, 1)",
    "clamp_max_op": "torch.clamp_max(a, 0.5)",
    "clamp_inverted": "torch.clamp(a, 2, 1)",
    "where_scalar_other": "torch.where(a > 0, a, 2.5)",
    "where_scalar_self": "torch.where(a > 0, 1, a)",
    "where_scalars_float": "torch.where(a > 0, 1.0, 0.0)",
    "where_scalars_int": "torch.where(a > 0, 1, 0)",
    "where_scalars_mixed": "torch.where(a > 0, 1.0, 0)",
    "masked_fill_float": "a.masked_fill(a > 1, 2.5)",
    "masked_fill_int": "a.masked_fill(a > 1, -1)",
    "masked_fill_zero_dim": "a.masked_fill(a > 1, torch.tensor(7))",
    "lerp": "torch.lerp(a, a * 2, 0.3)",
    "lerp_far": "torch.lerp(a, a + 1, 0.8)",
    "addcmul": "torch.addcmul(a, a, a, value=0.5)",
    "addcmul_int": "torch.addcmul(a, a, a, value=2)",
    "addcdiv": "torch.addcdiv(a, a, a + 10, value=0.5)",
}


@pytest.mark.parametrize("dtype", ALL, ids=ids(ALL))
@pytest.mark.parametrize("op", list(TENSOR_SCALAR))
def test_tensor_scalar(op: str, dtype: torch.dtype) -> None:
    domain = "positive" if op.startswith(("pow", "rpow", "rmod")) else "any"
    if op == "rpow" and not dtype.is_floating_point:
        domain = "exponent"
    check(f"return {TENSOR_SCALAR[op]}", make(dtype, domain=domain))


@pytest.mark.parametrize("dtype", ALL, ids=ids(ALL))
def test_runtime_scalar_arguments(dtype: torch.dtype) -> None:
    a = make(dtype)
    check("return a * s", a, 0.37, params="a, s: float")
    check("return a + s", a, 3, params="a, s: int")
    check("return a < s", a, 0.1, params="a, s: float")
    check("return a == s", a, 0.5, params="a, s: float")
    check("return torch.add(a, a, alpha=s)", a, 2, params="a, s: int")
    check("return torch.where(a > 0, s, a)", a, 1.25, params="a, s: float")
    check("return torch.clamp(a, lo, hi)", a, -1.0, 1.5, params="a, lo: float, hi: float")


# Eager's tiers of type promotion: tensors of rank > 0, then 0-dim tensors, then scalars.
PROMOTION_CASES = [
    ("a + b", (I32, ()), (F64, None)),  # int tensor + 0-dim double: float64
    ("a + b", (F32, ()), (F64, None)),  # float tensor + 0-dim double: float32
    ("a + b", (F16, ()), (F64, None)),  # half tensor + 0-dim double: half
    ("a + b", (U8, ()), (I64, None)),
    ("a + b", (B, ()), (I64, None)),
    ("a + b", (I8, ()), (U8, None)),
    ("a * b", (F16, ()), (F32, None)),
    ("a / b", (I32, ()), (I64, None)),
    ("a == b", (F16, ()), (F64, None)),  # compared as half, like eager
    ("a < b", (BF16, ()), (F32, None)),
    ("a // b", (F16, ()), (F64, None)),
    ("a % b", (BF16, ()), (F64, None)),
    ("torch.where(a > 0, a, b)", (I32, ()), (F64, None)),
    ("torch.maximum(a, b)", (I64, ()), (F32, None)),
    ("torch.clamp(a, b, b + 1)", (I32, ()), (F64, None)),
    ("a + b", (F64, None), (F32, ())),  # 0-dim self, tensor other
    ("a * b", (I64, None), (F16, ())),
]


@pytest.mark.parametrize(
    "expr,first,second",
    PROMOTION_CASES,
    ids=[f"{e}-{a[0]}-{b[0]}".replace("torch.", "") for e, a, b in PROMOTION_CASES],
)
def test_zero_dim_promotion(expr: str, first: tuple, second: tuple) -> None:
    def tensor(spec: tuple, seed: int) -> torch.Tensor:
        dtype, shape = spec
        if shape is None:
            return torch.tensor(0.6 if dtype.is_floating_point else 3, dtype=dtype)
        return make(dtype, domain="nonzero", seed=seed)

    check(f"return {expr}", tensor(first, 1), tensor(second, 2))


def assert_bitwise_as_eager(source: str, *args: Any) -> None:
    """`source`'s function scripted (three calls, a kernel launched) gives eager's dtype
    and bits on `args`."""
    namespace: dict[str, Any] = {"torch": torch}
    exec(source, namespace)  # noqa: S102 - the reference is the same source, eagerly
    expected = namespace["f"](*args)
    scripted = _script(source)
    before = fuser.stats()["kernel_launches"]
    for _ in range(3):
        actual = scripted(*args)
    assert fuser.stats()["kernel_launches"] > before, source
    assert actual.dtype == expected.dtype and torch.equal(actual, expected), source


@pytest.mark.parametrize("expr", ["a * b", "b * a", "a / b", "b / a", "a // b", "a - b", "b + a"])
@pytest.mark.parametrize("dtype", [F16, BF16], ids=ids([F16, BF16]))
@pytest.mark.parametrize("wide", [F32, F64], ids=ids([F32, F64]))
def test_a_wider_zero_dim_operand_rounds_as_eagers(
    expr: str, dtype: torch.dtype, wide: torch.dtype
) -> None:
    """A 16-bit tensor with a 0-dim float32/float64 tensor (1.2345678 is 1.234375 in
    float16): eager's CUDA kernels convert the 0-dim one to the 16-bit type like any
    tensor, its CPU kernels read it at float precision in mul and div and round it in add
    and sub. A Python scalar is read at float precision on both. Bit for bit."""
    a = _clone(make(dtype, shape=(64, 257), domain="nonzero", seed=5))
    b = torch.tensor(1.2345678901234, dtype=wide, device=DEVICE)
    assert_bitwise_as_eager(f"def f(a, b):\n    return ({expr}) * 1.0\n", a, b)
    scalar = expr.replace("b", "s")
    assert_bitwise_as_eager(
        f"def f(a, s: float):\n    return ({scalar}) * 1.0\n", a, 1.2345678901234
    )


ZERO_DIM_OTHERS = [
    "a ** b",
    "b ** a",
    "torch.atan2(a, b)",
    "torch.fmod(a, b)",
    "torch.remainder(a, b)",
    "torch.maximum(a, b)",
    "torch.where(a > 1, a, b)",
    "a.addcmul(a, b)",
    "a.addcdiv(a, b)",
    "a < b",
]


@pytest.mark.parametrize("expr", ZERO_DIM_OTHERS)
@pytest.mark.parametrize("dtype", [F16, BF16], ids=ids([F16, BF16]))
@pytest.mark.parametrize("wide", [F32, F64], ids=ids([F32, F64]))
def test_a_wider_zero_dim_operand_of_other_ops_as_eagers(
    expr: str, dtype: torch.dtype, wide: torch.dtype
) -> None:
    """The other fused binary and ternary ops of a 16-bit tensor and a 0-dim float32/
    float64 tensor: ours convert the 0-dim one to the 16-bit type, as eager's CPU kernels
    do (and its CUDA kernels are expected to, as in mul: run on the device). Bit for
    bit."""
    a = _clone(make(dtype, shape=(64, 257), domain="positive", seed=6))
    b = torch.tensor(1.2345678901234, dtype=wide, device=DEVICE)
    assert_bitwise_as_eager(f"def f(a, b):\n    return {expr}\n", a, b)


def test_half_scalar_comparisons_are_bitwise() -> None:
    # 0.1 rounds to 0.0999755859375 in half: eager compares with that value.
    for dtype in [F16, BF16]:
        x = torch.tensor([0.1, 0.2, 0.3, 1.1, 0.7], dtype=dtype)
        for op in ["<", "<=", "==", "!=", ">", ">="]:
            for s in ["0.1", "0.2", "0.3", "1.1", "0.7"]:
                check(f"return a {op} {s}", x)


# ---- ternary and lerp -----------------------------------------------------------------


@pytest.mark.parametrize(
    "dtypes",
    [
        (F32, F32, F32),
        (F16, F16, F16),
        (BF16, BF16, BF16),
        (F64, F64, F64),
        (I32, F32, I64),
        (F16, F32, I8),
        (I64, I64, I64),
        (U8, U8, U8),
        (B, I32, F16),
    ],
    ids=lambda d: "-".join(ids(d)),
)
@pytest.mark.parametrize(
    "op", ["addcmul", "addcdiv", "lerp", "where", "clamp", "clamp_none", "masked_fill"]
)
def test_ternary(op: str, dtypes: tuple[torch.dtype, ...]) -> None:
    a = make(dtypes[0], seed=1)
    b = make(dtypes[1], seed=2)
    c = make(dtypes[2], domain="nonzero", seed=3)
    expr = {
        "addcmul": "torch.addcmul(a, b, c, value=2)",
        "addcdiv": "torch.addcdiv(a, b, c, value=0.5)",
        "lerp": "torch.lerp(a, b, c)",
        "where": "torch.where(c > 0, a, b)",
        "clamp": "torch.clamp(a, b, c)",
        "clamp_none": "torch.clamp(a, None, c)",
        "masked_fill": "a.masked_fill(c > 0, b.sum())",
    }[op]
    if op == "lerp":  # eager requires one dtype; the weight spans both formulas
        b, c = (
            b.to(a.dtype),
            torch.linspace(-1, 2, a.numel()).reshape(a.shape).to(a.dtype),
        )
    check(f"return {expr}", a, b, c)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_lerp_scalar_weights(dtype: torch.dtype) -> None:
    a, b = make(dtype, seed=1), make(dtype, seed=2)
    for w in ["0.0", "0.25", "0.5", "0.75", "1.0", "-0.5", "1.5"]:
        check(f"return torch.lerp(a, b, {w})", a, b)
    check("return torch.lerp(a, b, w)", a, b, 0.3, params="a, b, w: float")


# ---- casts ----------------------------------------------------------------------------

CAST_TARGETS = [
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "bool",
]


@pytest.mark.parametrize("target", CAST_TARGETS)
@pytest.mark.parametrize("source", ALL, ids=ids(ALL))
def test_to_dtype(source: torch.dtype, target: str) -> None:
    # Values convert in range (float -> int is undefined out of range, also in eager).
    domain = "positive" if target == "uint8" else "any"
    x = make(source, domain=domain)
    if str(source) == f"torch.{target}":
        pytest.skip("same dtype: eager returns the input itself (an alias)")
    check(f"return a.to(torch.{target})", x)
    check(f"return a.to(dtype=torch.{target}, copy=True)", x)


@pytest.mark.parametrize("source", ALL, ids=ids(ALL))
def test_cast_methods(source: torch.dtype) -> None:
    x = make(source, domain="positive")
    for method in ["float", "double", "half", "int", "long"]:
        if {"float": F32, "double": F64, "half": F16, "int": I32, "long": I64}[method] != source:
            check(f"return a.{method}()", x)
    other = make(F64 if source != F64 else I16)
    check("return a.type_as(b)", x, other)
    check("return a.to(b)", x, other)
    if source != F64:
        check("return a.to(a.device, torch.float64)", x)
    if source != I16:
        check("return a.to(device=a.device, dtype=torch.int16)", x)


FLOAT_SOURCES = [F32, F64, F16, BF16]
OUT_OF_RANGE = [float("nan"), float("inf"), -float("inf"), 3e9, -3e9, 1e20, 300.0, -1.0, 2.7]


@pytest.mark.parametrize("target", ["int8", "int16", "int32", "int64", "uint8"])
@pytest.mark.parametrize("source", FLOAT_SOURCES, ids=ids(FLOAT_SOURCES))
def test_float_to_integer_gives_eagers_values_out_of_range(
    source: torch.dtype, target: str
) -> None:
    # NaN, infinities and values out of the target's range: undefined in C++, defined by
    # the machine's conversion in eager (x86: the int32 or int64 minimum; CUDA: NaN 0,
    # saturated). A round trip back to floating must not fold into a truncation.
    x = torch.tensor(OUT_OF_RANGE * 8, dtype=source)
    check(f"return a.to(torch.{target})", x)
    check(f"return a.to(torch.{target}).to(a.dtype) * 2.0 + 1.0", x)


@pytest.mark.parametrize("target", ["int8", "int16", "int32", "int64", "uint8"])
@pytest.mark.parametrize("source", FLOAT_SOURCES, ids=ids(FLOAT_SOURCES))
def test_float_to_integer_and_back_gives_a_positive_zero(source: torch.dtype, target: str) -> None:
    # The integer 0 converts back to +0.0 (1 / it is inf), also where a negative x in
    # (-1, 0) truncated to it: g++ would fold the two conversions into truncf(x), -0.0.
    # 37 values: vector loops and their scalar tails both see them.
    x = torch.tensor([-0.2, -0.7, 0.3, -1.5, 2.5, -0.0, 0.0] * 5 + [-0.9, -0.1], dtype=source)
    if target == "uint8":
        x = x.abs()
    check(f"return 1.0 / a.to(torch.{target}).to(a.dtype)", x)
    check(f"v = a.to(torch.{target})\nreturn v, 2.0 / v, a / v", x)


@pytest.mark.parametrize("dtype", [I32, I64], ids=ids([I32, I64]))
def test_integer_overflow_wraps_as_eagers_stored_results(dtype: torch.dtype) -> None:
    # Eager stores a - b wrapped, then compares: fused in one kernel, signed overflow must
    # wrap too (undefined in C++: a compiler may fold a > a - b into b > 0).
    info = torch.iinfo(dtype)
    a = torch.tensor([-3, 5, info.min, info.max, 7, -1] * 4, dtype=dtype)
    b = torch.tensor([info.max, info.min + 1, 1, -1, info.max, info.min] * 4, dtype=dtype)
    check("v = a - b\nreturn v, (a > v).float()", a, b)
    check("v = a + b\nreturn v, (v < a).float()", a, b)
    check("v = a * b\nreturn v, (v > a).float(), -a", a, b)


def test_to_bool_reads_nan_as_true() -> None:
    check("return a.to(torch.bool)", make(F32, domain="specials"))
    check("return a.to(torch.bool)", make(F16, domain="specials"))


AUTOCAST_SOURCES = [F32, F64, F16, BF16, I32]


@pytest.mark.parametrize(
    "cuda_enabled,cpu_enabled", [(False, False), (False, True), (True, False), (True, True)]
)
@pytest.mark.parametrize("source", AUTOCAST_SOURCES, ids=ids(AUTOCAST_SOURCES))
def test_autocast_casts(source: torch.dtype, cuda_enabled: bool, cpu_enabled: bool) -> None:
    # TorchScript's autocast pass writes these (test_autocast.py). Only the flag of the
    # tensor's device counts; reduced converts float32 only, full the half types only.
    flags = f"{cuda_enabled}, {cpu_enabled}"
    x = make(source)
    reduced = "torch.ops.aten._autocast_to_reduced_precision"
    check(f"return {reduced}(a * 3, {flags}, torch.float16, torch.bfloat16) - 1", x)
    check(f"return torch.ops.aten._autocast_to_full_precision(a * 3, {flags}) - 1", x)


def test_to_half_of_double_rounds_like_eager() -> None:
    x = torch.tensor([0.1, 1 / 3, 65504.0, 65520.0, 1e-8, 2.0**-24 * 1.5], dtype=F64)
    check("return a.to(torch.float16)", x)
    check("return a.to(torch.bfloat16)", x)


def test_to_with_channels_last_is_not_fused() -> None:
    x = make(F32, shape=(2, 3, 4, 5))
    check("return a.to(torch.float16, memory_format=torch.channels_last)", x, fused=False)


# ---- refusals: arguments the kernel cannot take ---------------------------------------


def test_non_constant_rounding_mode_is_not_fused() -> None:
    a, b = make(F32), make(F32, domain="nonzero")
    check(
        "return torch.div(a, b, rounding_mode=m)",
        a,
        b,
        "floor",
        params="a, b, m: Optional[str]",
        fused=False,
    )


def test_optional_bound_is_not_fused() -> None:
    check(
        "return torch.clamp(a, lo, 1.0)",
        make(F32),
        0.5,
        params="a, lo: Optional[float]",
        fused=False,
    )


# ---- layouts: broadcasting, strides, 0-dim and empty tensors -------------------------

LAYOUT_OPS = [
    "a + b",
    "torch.where(a > b, a, b)",
    "torch.clamp(a, b, b + 2)",
    "torch.nn.functional.gelu(a) * b",
    "a < b",
    "a // torch.abs(b) + 1",
    "torch.lerp(a, b, 0.3)",
    "a.to(torch.float16) + b",
]


def _layout(name: str, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    def t(shape: tuple[int, ...], seed: int) -> torch.Tensor:
        return make(dtype, shape=shape, seed=seed)

    if name == "broadcast_row":
        return t((4, 1, 5), 1), t((3, 5), 2)
    if name == "broadcast_one_element":
        return t((6, 8), 1), t((1,), 2)
    if name == "transposed":
        return t((6, 8), 1).t(), t((6, 8), 2).t()
    if name == "transposed_and_contiguous":
        return t((6, 8), 1).t(), t((8, 6), 2)
    if name == "sliced_step":
        return t((6, 8), 1)[::2, 1::3], t((6, 8), 2)[1::2, ::3]
    if name == "expanded":
        return t((1, 8), 1).expand(6, 8), t((6, 8), 2)
    if name == "zero_dim":
        return t((), 1), t((), 2)
    if name == "zero_dim_and_tensor":
        return t((), 1), t((6, 8), 2)
    if name == "empty":
        return t((0, 8), 1), t((0, 8), 2)
    if name == "empty_broadcast":
        return t((0, 1), 1), t((1, 8), 2)
    if name == "channels_last":
        cl = torch.channels_last
        return t((2, 3, 4, 5), 1).to(memory_format=cl), t((2, 3, 4, 5), 2).to(memory_format=cl)
    raise ValueError(name)


LAYOUTS = [
    "broadcast_row",
    "broadcast_one_element",
    "transposed",
    "transposed_and_contiguous",
    "sliced_step",
    "expanded",
    "zero_dim",
    "zero_dim_and_tensor",
    "empty",
    "empty_broadcast",
    "channels_last",
]


@pytest.mark.parametrize("dtype", [F32, F16, I32, F64], ids=ids([F32, F16, I32, F64]))
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("expr", LAYOUT_OPS)
def test_layouts(expr: str, layout: str, dtype: torch.dtype) -> None:
    check(f"return {expr}", *_layout(layout, dtype))


def test_every_table_schema_is_exercised() -> None:
    """Each schema of the table appears in some case of this file, or of
    test_reductions.py, test_batch_norm.py, test_batch_norm_training.py, test_dropout.py,
    test_layer_norm_backward.py, test_grad_sum_to_size.py, test_inplace.py or
    test_rms_norm.py (by operator name)."""
    import inspect
    import sys

    import test_batch_norm
    import test_batch_norm_training
    import test_dropout
    import test_grad_sum_to_size
    import test_inplace
    import test_layer_norm_backward
    import test_reductions
    import test_rms_norm
    import test_vector_sums

    # Reductions, batch_norm and autodiff's dropout and layer_norm have their own files.
    text = inspect.getsource(sys.modules[__name__])
    others = (test_reductions, test_batch_norm, test_batch_norm_training, test_dropout)
    for other in (
        *others,
        test_layer_norm_backward,
        test_grad_sum_to_size,
        test_inplace,
        test_rms_norm,
        test_vector_sums,
    ):
        text += inspect.getsource(other)
    aliases = {
        "__and__": "&",
        "__or__": "|",
        "__xor__": "^",
        "rsub": "rsub",
        "neg": "-a",
        "to": ".to(",
        "_to_copy": "",
        "floor_divide": "//",
        "remainder": "%",
        "max": "torch.max(",
        "min": "torch.min(",
        "true_divide": "true_divide",
    }
    missing = []
    for schema in fuser._C.supported_schemas():
        name = schema.split("(")[0].split("::")[1].split(".")[0]
        if name in ("_to_copy",):  # produced by passes, not by TorchScript source
            continue
        needle = aliases.get(name, name)
        if needle not in text:
            missing.append(schema)
    assert not missing, missing


# ---- chains: several table ops in one group -------------------------------------------


def test_chains_of_ops_fuse() -> None:
    for dtype in [F32, F16, BF16, F64]:
        a, b = make(dtype, seed=1), make(dtype, seed=2)
        check("return torch.sigmoid(a) * torch.tanh(b) + 0.5", a, b)
        check("return torch.nn.functional.gelu(a + b).to(torch.float32) * 2", a, b)
        check("return torch.where(a > b, torch.relu(a), -b).clamp(-1, 1)", a, b)
        check("x = a * 0.1\nreturn (x < 0.1) & (b > 0)", a, b)
    for dtype in [I32, I64, U8, I8]:
        a, b = make(dtype, seed=1), make(dtype, domain="nonzero", seed=2)
        check("return (a // b + a % b) * 2 - (a & 3)", a, b)
        check("return (a + b).to(torch.float32) / 3 + a", a, b)


def test_combinations_of_dtypes_in_one_group() -> None:
    for da, db in itertools.product([I32, F16, B], [F32, U8]):
        a, b = make(da, seed=1), make(db, seed=2)
        check("return (a + b) * (a > 0)", a, b)
