"""Seeded random elementwise programs over mixed dtypes, against eager: inputs of every
dtype the fuser computes (floats of 16, 32 and 64 bits, signed and unsigned integers,
bool), zero-dim tensors beside full ones, Python scalars of each kind as literals and as
parameters, and steps that promote, compare, select, convert and wrap around, with
chunks, cats, views, reductions and broadcasts between them. Each program is optimized
on one draw of inputs and called on another. Each result must have eager's dtype, shape,
strides and values; where eager raises, the scripted function must raise too.
tools/fuzz_dtypes.py runs many more seeds of the same programs."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
import torch
from test_output_layout import random_shape

import fuser
from helpers import (
    devices,
    eager_from_source,
    run_optimized,
    script_from_source,
    torchscript_alone,
)

DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.bool,
]
CONVERSIONS = ["float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool"]
SCALARS = ["2", "-3", "0.5", "1.5", "True", "False"]
ARITHMETIC = ["+", "-", "*", "/"]
BITWISE = ["&", "|", "^"]
COMPARISONS = ["<", ">", "==", "!=", "<=", ">="]
FLOAT_UNARY = ["exp", "sigmoid", "tanh", "sin", "sqrt", "log1p", "reciprocal"]
ANY_UNARY = ["abs", "neg", "relu", "sign", "square"]
# Steps that change shape or layout between elementwise ones: chunks and cats (which
# groups take in), views, reductions, broadcasts. Shapes that do not fit raise in eager.
STRUCTURAL = [
    "torch.chunk({a}, 2, -1)[0]",
    "torch.chunk({a}, 2, -1)[1]",
    "torch.cat([{a}, {b}], -1)",
    "{a}.transpose(0, -1)",
    "{a}.unsqueeze(0)",
    "{a}.reshape(-1)",
    "{a}.sum(-1, keepdim=True)",
    "{a}.amax(-1)",
    "{a}.expand_as({b})",
    "{a}.contiguous()",
    # Values from sizes alone (passes/per_shape_values.cpp caches them per size).
    "torch.zeros_like({a}).fill_(2) - {b}",
    "{a}.new_ones({b}.shape).cumsum(-1)",
    "torch.arange({a}.numel(), device={a}.device).view({a}.shape).to({a}.dtype)",
    # Element moves with a roll (passes/relayouts.cpp gathers them in one pass).
    "torch.roll({a}, 1, 0).reshape(-1)",
    "torch.roll({a}, (2, -1), (0, -1)).transpose(0, -1).contiguous()",
    "{a}.transpose(0, -1).roll(-1, 0)",
]
BASES = [(3, 4, 5), (2, 3, 4, 5), (6, 7), (9,)]


def random_input(rng: random.Random, shape: tuple[int, ...], dtype: torch.dtype, device: str):
    """Values each dtype holds exactly and that keep arithmetic away from overflow in
    floats: small integers (unsigned from 0), bools, floats of a few units."""
    if dtype == torch.bool:
        t = torch.rand(shape) < 0.5
    elif dtype == torch.uint8:
        t = torch.randint(0, 12, shape, dtype=dtype)
    elif not dtype.is_floating_point:
        t = torch.randint(-8, 9, shape, dtype=dtype)
    else:
        t = (torch.randn(shape) * 2).to(dtype)
    t = t.to(device)
    layout = rng.choice(["contiguous", "transposed", "sliced", "expanded"])
    if layout == "transposed" and t.dim() >= 2:
        return t.transpose(0, -1).contiguous().transpose(0, -1)
    if layout == "sliced" and t.dim() >= 1 and t.shape[-1] > 1:
        return torch.cat([t, t], -1)[..., ::2]
    if layout == "expanded" and t.dim() >= 1 and t.shape[0] > 1:
        return t[:1].expand(t.shape)
    return t


def random_scalar(rng: random.Random, scalars: list[str]) -> str:
    """A literal or, more often where the program has them, a scalar parameter."""
    parameters = [name for name in scalars if name.startswith("s")]
    return rng.choice(parameters if parameters and rng.random() < 0.7 else SCALARS)


def random_step(rng: random.Random, values: list[str], scalars: list[str]) -> str:
    """One expression over earlier values and scalars; some raise in eager for some
    dtypes (bitwise ops on floats, neg of bool), which the test then expects."""
    a, b = rng.choice(values), rng.choice(values)
    if rng.random() < 0.18:
        return rng.choice(STRUCTURAL).format(a=a, b=b)
    roll = rng.random()
    if roll < 0.3:
        other = b if rng.random() < 0.6 else random_scalar(rng, scalars)
        return f"{a} {rng.choice(ARITHMETIC)} {other}"
    if roll < 0.38:
        return f"{random_scalar(rng, scalars)} {rng.choice(['-', '*'])} {a}"
    if roll < 0.46:
        other = b if rng.random() < 0.6 else random_scalar(rng, scalars)
        return f"{a} {rng.choice(COMPARISONS)} {other}"
    if roll < 0.54:
        return f"{a} {rng.choice(BITWISE)} {b}"
    if roll < 0.64:
        return f"{a}.to(torch.{rng.choice(CONVERSIONS)})"
    if roll < 0.72:
        return f"torch.{rng.choice(FLOAT_UNARY)}({a}.abs().float() + 0.5)"
    if roll < 0.8:
        return f"torch.{rng.choice(ANY_UNARY)}({a})"
    if roll < 0.88:
        c = rng.choice(values)
        return f"torch.where({c} > 0, {a}, {b})"
    if roll < 0.94:
        return f"torch.{rng.choice(['maximum', 'minimum'])}({a}, {b})"
    return f"torch.clamp({a}, -2, 3)"


def random_program(rng: random.Random) -> tuple[str, int, list[str]]:
    """The source, its tensor inputs' count and the kinds of its scalar parameters (after
    the tensors: float, int or bool, given anew at every call)."""
    num_inputs = rng.randint(1, 4)
    values = [f"x{i}" for i in range(num_inputs)]
    kinds = [rng.choice(["float", "int", "bool"]) for _ in range(rng.choice([0, 0, 1, 2]))]
    scalars = SCALARS + [f"s{i}" for i in range(len(kinds))]
    lines = []
    for step in range(rng.randint(2, 6)):
        lines.append(f"    v{step} = {random_step(rng, values, scalars)}")
        values.append(f"v{step}")
    computed = values[num_inputs:]
    returned = sorted(set(rng.sample(computed, rng.randint(1, min(3, len(computed))))))
    if computed[-1] not in returned:
        returned.append(computed[-1])
    body = "\n".join(lines)
    signature = ", ".join(values[:num_inputs] + [f"s{i}: {k}" for i, k in enumerate(kinds)])
    source = f"def f({signature}):\n{body}\n    return ({', '.join(returned)},)\n"
    return source, num_inputs, kinds


def random_arguments(
    rng: random.Random, num_inputs: int, kinds: list[str], device: str
) -> list[Any]:
    base = rng.choice(BASES)
    args: list[Any] = []
    for _ in range(num_inputs):
        shape = () if rng.random() < 0.15 else random_shape(rng, base)
        args.append(random_input(rng, shape, rng.choice(DTYPES), device))
    draw = {
        "float": lambda: rng.choice([0.5, -1.25, 3.0]),
        "int": lambda: rng.randint(-3, 4),
        "bool": lambda: rng.random() < 0.5,
    }
    return args + [draw[kind]() for kind in kinds]


Outcome = tuple[torch.Tensor, ...] | str


def outcome(fn: Callable[..., Any], *args: Any) -> Outcome:
    """`fn(*args)`'s results, or what it raised."""
    try:
        return tuple(fn(*args))
    except Exception as e:  # noqa: BLE001 - raising is an outcome to compare
        return f"raised {type(e).__name__}: {str(e)[:200]}"


def negative_zeros(t: torch.Tensor) -> torch.Tensor:
    """Where `t` holds -0.0 (assert_close takes it for +0.0; 1 / it is -inf)."""
    return (t == 0) & torch.signbit(t)


def memory(value: Any) -> int | None:
    """Where a nonempty tensor's storage lies (values that share it share this)."""
    if not isinstance(value, torch.Tensor) or value.numel() == 0:
        return None
    return value.untyped_storage().data_ptr()


def sharing(results: tuple[Any, ...], args: list[Any]) -> set[tuple[int, str]]:
    """Which results share memory with which inputs and earlier results."""
    places = [(f"input {k}", memory(a)) for k, a in enumerate(args)]
    shared = set()
    for i, result in enumerate(results):
        at = memory(result)
        shared |= {(i, name) for name, where in places if at is not None and where == at}
        places.append((f"result {i}", at))
    return shared


def difference(got: Outcome, want: Outcome, args: list[Any]) -> str | None:
    """How outcome `got` differs from `want` (both of `args`): one raising alone, a
    result's dtype, shape, strides or values (zeros' signs too), or which results share
    memory with the inputs and each other (eager's `x.to(x.dtype)` is x itself, a write
    to one seen in the other)."""
    if isinstance(got, str) or isinstance(want, str):
        if isinstance(got, str) and isinstance(want, str):
            return None
        return f"fused: {got if isinstance(got, str) else 'results'}; reference: " + (
            want if isinstance(want, str) else "results"
        )
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if not isinstance(w, torch.Tensor) or not isinstance(g, torch.Tensor):
            # a step over scalar parameters alone
            if type(g) is not type(w) or not (g == w or (g != g and w != w)):
                return f"result {i}: {g!r} vs {w!r}"
            continue
        if (g.dtype, g.shape, g.stride()) != (w.dtype, w.shape, w.stride()):
            layouts = (g.dtype, g.shape, g.stride()), (w.dtype, w.shape, w.stride())
            return f"result {i}: {layouts[0]} vs {layouts[1]}"
        try:
            torch.testing.assert_close(g, w, equal_nan=True)
        except AssertionError as e:
            return f"result {i}: {e}"
        if g.is_floating_point() and not torch.equal(negative_zeros(g), negative_zeros(w)):
            return f"result {i}: zeros of other signs ({g.flatten()[:8]} vs {w.flatten()[:8]})"
    if sharing(got, args) != sharing(want, args):
        return f"shared memory {sorted(sharing(got, args))} vs {sorted(sharing(want, args))}"
    return None


def difference_from_eager(source: str, calls: list[list[Any]]) -> str | None:
    """Why the fused program differs from eager (None where it does not), called on each
    argument list of `calls` in turn: optimized on the first, then given the others
    (other dtypes, shapes and layouts: its guards must send them elsewhere). Where
    TorchScript without any fuser (NNC off too) differs from eager itself (it drops a dead statement
    that raises in eager; it types `bool_tensor + True` as int64), the fused program must
    equal that instead: the fuser gets TorchScript's graph, not Python's."""
    try:
        fused_fn, plain_fn = script_from_source(source), None
    except RuntimeError:
        return None  # TorchScript's front end rejects it (`cat` of a tensor and an int)
    for i, args in enumerate(calls):
        fused = outcome(run_optimized, fused_fn, *args) if i == 0 else outcome(fused_fn, *args)
        if fuser.stats()["cuda_cross_compile_failures"]:
            return "a kernel's CUDA source did not compile (FUSER_CROSS_COMPILE)"
        from_eager = difference(fused, outcome(eager_from_source(source), *args), args)
        if from_eager is None:
            continue
        with torchscript_alone():
            if plain_fn is None:
                plain_fn = script_from_source(source)
                outcome(run_optimized, plain_fn, *calls[0])
            plain = outcome(plain_fn, *args)
        from_plain = difference(fused, plain, args)
        if from_plain is not None:
            return f"call {i}: {from_eager}; from TorchScript alone: {from_plain}"
    return None


def described(arg: Any) -> Any:
    """A tensor argument's dtype, shape and strides; a scalar itself."""
    return (arg.dtype, tuple(arg.shape), arg.stride()) if isinstance(arg, torch.Tensor) else arg


ProgramMaker = Callable[[random.Random], tuple[str, int, list[str]]]


def groups_over_random_programs(
    seed: int, programs: int, device: str, make: ProgramMaker = random_program, calls: int = 2
) -> tuple[int, list[str]]:
    """Runs `programs` programs of `seed` (from `make`: a source, its tensor inputs'
    count and its scalar parameters' kinds), each optimized on one draw of arguments and
    then called on `calls - 1` more; the groups they formed and their failures."""
    rng = random.Random(seed)
    failures, formed = [], 0
    with fuser.enabled(True):
        for _ in range(programs):
            source, num_inputs, kinds = make(rng)
            draws = [random_arguments(rng, num_inputs, kinds, device) for _ in range(calls)]
            fuser.reset_stats()
            why = difference_from_eager(source, draws)
            formed += fuser.stats()["groups_formed"]
            if why is not None:
                layouts = [[described(a) for a in c] for c in draws]
                failures.append(f"{source}calls {layouts}\n{why}")
    return formed, failures


@pytest.mark.parametrize("device", devices())
def test_random_mixed_dtype_programs_match_eager(fused: None, device: str) -> None:
    formed, failures = groups_over_random_programs(20261129, 80, device)
    assert not failures, "\n---\n".join(failures[:5])
    assert formed > 40  # most programs fuse something: the check is of fused code


def random_autocast_program(rng: random.Random) -> tuple[str, list[torch.Tensor]]:
    """A matmul, then elementwise steps over its result and two more inputs, with its
    inputs: float32 or bfloat16, the bias-like ones broadcast or zero-dim."""
    values = ["y", "b", "c"]
    lines = ["    y = torch.mm(x, w)"]
    for step in range(rng.randint(1, 5)):
        lines.append(f"    v{step} = {random_step(rng, values, SCALARS)}")
        values.append(f"v{step}")
    returned = set(rng.sample(values[3:], rng.randint(1, len(values) - 3))) | {values[-1]}
    body = "\n".join(lines)
    source = f"def f(x, w, b, c):\n{body}\n    return ({', '.join(sorted(returned))},)\n"
    m, k, n = rng.choice([(4, 8, 6), (33, 17, 65), (128, 64, 96)])

    def dtype() -> torch.dtype:
        return rng.choice([torch.float32, torch.bfloat16])

    w = torch.randn(k, n, dtype=dtype())
    args = [
        torch.randn(m, k, dtype=dtype()),
        w.t().contiguous().t() if rng.random() < 0.3 else w,
        torch.randn(rng.choice([(n,), (m, n), (1, n)]), dtype=dtype()),
        torch.randn(rng.choice([(n,), (m, n), ()]), dtype=dtype()),
    ]
    return source, args


def test_random_programs_under_cpu_autocast_match_torchscript(fused: None) -> None:
    # Under autocast the JIT's own pass casts differently from eager (test_autocast.py),
    # so the reference is TorchScript alone, under the same autocast. (A run of such
    # programs found a float -> int -> float conversion giving -0.0: expr_printer.cpp,
    # test_ops.py::test_float_to_integer_and_back_gives_a_positive_zero.)
    rng = random.Random(20261129)
    failures, formed = [], 0
    with torch.autocast("cpu", dtype=torch.bfloat16):
        for _ in range(40):
            source, args = random_autocast_program(rng)
            try:
                fused_fn, plain_fn = script_from_source(source), script_from_source(source)
            except RuntimeError:
                continue  # the front end rejects it
            with fuser.enabled(True):
                fuser.reset_stats()
                got = outcome(run_optimized, fused_fn, *args)
                formed += fuser.stats()["groups_formed"]
            with fuser.enabled(False):
                want = outcome(run_optimized, plain_fn, *args)
            why = difference(got, want, args)
            if why is not None:
                failures.append(f"{source}inputs {[described(a) for a in args]}\n{why}")
    assert not failures, "\n---\n".join(failures[:3])
    assert formed >= 20
