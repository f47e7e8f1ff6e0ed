"""Seeded random programs of reductions between elementwise steps, against eager: sums,
means, extremes, variances and norms over random constant dims of the full-rank value
(keepdim or not), softmax over the last dim (and softmax or log_softmax over any dim),
reduced values broadcast back, sibling
statistics of one value, and inputs of every layout. Shapes, dtypes, strides and values
must be eager's whatever the partition makes of the program (row groups, column groups,
the sibling merge, values left to the interpreter)."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
import torch
from test_output_layout import random_tensor

import fuser
from helpers import devices, eager_from_source, run_optimized, script_from_source

UNARY = ["exp", "sigmoid", "tanh", "abs", "relu"]
BINARY = ["+", "-", "*"]
REDUCTIONS = ["sum", "mean", "amax", "amin", "var", "std", "norm"]
SHAPES = [(6, 5, 4), (3, 4, 5, 6), (40, 7), (2, 3, 33)]
# Size-1 dims, whose strides TensorIterator sets by its own order of the dims: eager's
# elementwise results there are contiguous in memory but not always row-major in strides.
SHAPES_WITH_ONES = [(1, 40), (6, 1, 4), (3, 1, 5, 1), (1, 7, 1), (2, 1, 1, 33)]


def reduction_call(rng: random.Random, value: str, rank: int) -> str:
    dims = sorted(rng.sample(range(rank), rng.randint(1, rank)))
    dim = str(dims) if len(dims) > 1 or rng.random() < 0.5 else str(dims[0])
    keep = rng.random() < 0.6
    kind = rng.choice(REDUCTIONS)
    if kind == "norm":
        return f"torch.norm({value}, 2, {dim}, {keep})"
    if kind in ("var", "std") and rng.random() < 0.5:
        return f"torch.{kind}({value}, {dim}, correction=0, keepdim={keep})"
    return f"{value}.{kind}({dim}, keepdim={keep})"


def random_program(rng: random.Random, rank: int) -> tuple[str, int]:
    """A few full-shape inputs; elementwise steps; reductions of full-shape values, each
    used reduced, broadcast back when kept, or returned; sometimes a sibling statistic
    of the same value; softmax over the last dim, of the value or of its rows viewed as
    one batch, or softmax or log_softmax over any dim."""
    num_inputs = rng.randint(1, 3)
    full = [f"x{i}" for i in range(num_inputs)]
    returned: list[str] = []
    lines: list[str] = []
    for step in range(rng.randint(2, 6)):
        name = f"v{step}"
        roll = rng.random()
        if roll < 0.3:
            lines.append(f"    {name} = torch.{rng.choice(UNARY)}({rng.choice(full)})")
            full.append(name)
        elif roll < 0.5:
            a, b = rng.choice(full), rng.choice(full + ["0.5"])
            lines.append(f"    {name} = {a} {rng.choice(BINARY)} {b}")
            full.append(name)
        elif roll < 0.6:
            source = rng.choice(full)
            pick = rng.random()
            if pick < 0.35:
                lines.append(f"    {name} = torch.softmax({source} * 0.5, -1)")
            elif pick < 0.65:  # over a dim before the last: rows apart, walked as columns
                kind = rng.choice(["softmax", "log_softmax"])
                lines.append(f"    {name} = torch.{kind}({source} * 0.5, {rng.randrange(rank)})")
            else:  # over a view of the rows: the softmax runs before the view
                rows = f"({source} * 0.5).reshape(-1, {source}.size(-1))"
                lines.append(f"    {name} = torch.softmax({rows}, -1).view_as({source})")
            full.append(name)
        else:
            source = rng.choice(full)
            call = reduction_call(rng, source, rank)
            lines.append(f"    {name} = {call}")
            if rng.random() < 0.4:  # a sibling statistic of the same value
                lines.append(f"    {name}s = {reduction_call(rng, source, rank)}")
                returned.append(f"{name}s")
            if "keepdim=True" in call or call.endswith("True)"):
                # Broadcast back: the reduced value joins a full-shape step.
                lines.append(f"    {name}b = {source} - {name}")
                full.append(f"{name}b")
            returned.append(name)
    returned.append(full[-1] if len(full) > num_inputs else returned[-1] if returned else "x0")
    outs = ", ".join(sorted(set(returned)))
    signature = ", ".join(f"x{i}" for i in range(num_inputs))
    body = "\n".join(lines)
    return f"def f({signature}):\n{body}\n    return ({outs},)\n", num_inputs


def difference_from_eager(
    source: str, args: list[torch.Tensor], later: list[torch.Tensor] | None = None
) -> str | None:
    """How the fused program's results differ from eager's (shape, dtype, strides,
    values), or that a CUDA cross-compile failed; None where nothing does. `later`: a
    call after the profiled ones with these arguments (other layouts of the same
    shapes), checked too."""
    fn = script_from_source(source)
    calls = [("", run_optimized(fn, *args), args)]
    if later is not None:
        calls.append(("a later call: ", fn(*later), later))
    for what, got, inputs in calls:
        want = eager_from_source(source)(*inputs)
        for g, w in zip(got, want, strict=True):
            if (g.shape, g.dtype, g.stride()) != (w.shape, w.dtype, w.stride()):
                return (
                    f"{what}layout {(g.shape, g.dtype, g.stride())} vs "
                    f"{(w.shape, w.dtype, w.stride())}"
                )
            if not torch.allclose(g, w, rtol=2e-5, atol=2e-5, equal_nan=True):
                return f"{what}values differ by up to {(g - w).abs().nan_to_num(0).max().item()}"
    if fuser.stats()["cuda_cross_compile_failures"]:
        return "a CUDA cross-compile failed"
    return None


def groups_over_random_programs(
    seed: int,
    count: int,
    shapes: list[tuple[int, ...]],
    make_arg: Callable[..., torch.Tensor],
    relaid: bool = False,
    interpreted: list[int] | None = None,
) -> int:
    """Checks `count` seeded random programs against eager, each over a shape of
    `shapes` and inputs `make_arg(rng, shape, i)`; returns the groups they formed.
    `relaid`: each program is called once more with inputs of the same shapes made
    again (other layouts than the profiled ones, as a gradient may arrive).
    `interpreted`: each program's interpreted group calls appended."""
    rng = random.Random(seed)
    formed = 0
    with fuser.enabled(True):
        for _ in range(count):
            shape = rng.choice(shapes)
            source, num_inputs = random_program(rng, len(shape))
            args = [make_arg(rng, shape, i) for i in range(num_inputs)]
            later = [make_arg(rng, shape, i) for i in range(num_inputs)] if relaid else None
            fuser.reset_stats()
            why = difference_from_eager(source, args, later)
            if interpreted is not None:
                interpreted.append(fuser.stats()["interpreted_runs"])
            assert why is None, (
                source,
                [(a.shape, a.stride()) for a in args],
                [(a.shape, a.stride()) for a in later or []],
                why,
            )
            formed += fuser.stats()["groups_formed"]
    return formed


@pytest.mark.parametrize("device", devices())
def test_random_reduction_programs_match_eager(device: str) -> None:
    def make_arg(rng: random.Random, shape: tuple[int, ...], _: int) -> torch.Tensor:
        return random_tensor(rng, shape, device)

    formed = groups_over_random_programs(20261126, 40, SHAPES, make_arg)
    assert formed >= 20  # most programs form a group: the partition is what is tested


@pytest.mark.parametrize("device", devices())
def test_later_calls_in_other_layouts_match_eager(device: str) -> None:
    """Each program profiled on inputs of random layouts, then called on inputs of other
    random layouts: the kernels take eager's layouts of that call (or the call runs
    interpreted), never the profiled ones."""

    def make_arg(rng: random.Random, shape: tuple[int, ...], _: int) -> torch.Tensor:
        return random_tensor(rng, shape, device)

    interpreted: list[int] = []
    formed = groups_over_random_programs(20261130, 60, SHAPES, make_arg, True, interpreted)
    assert formed >= 30
    # Most calls run kernels (an interpreted call gives eager's values by construction
    # and would test nothing).
    assert sum(interpreted) < formed // 3, (sum(interpreted), formed)


def tensor_with_size_one_dims(
    rng: random.Random, shape: tuple[int, ...], device: str, broadcast: bool
) -> torch.Tensor:
    """A tensor of `shape` (some dims made 1 where `broadcast`: it broadcasts to the
    others) laid out in a random dim order, so that its size-1 dims have the strides
    that order gives them (a transposed [40, 1] is [1, 40] with strides (1, 1))."""
    sizes = [1 if broadcast and rng.random() < 0.5 else n for n in shape]
    order = list(range(len(sizes)))
    rng.shuffle(order)
    stored = torch.randn([sizes[d] for d in order], device=device)
    return stored.permute([order.index(d) for d in range(len(sizes))])


@pytest.mark.parametrize("device", devices())
def test_random_reduction_programs_over_size_one_dims_match_eager(device: str) -> None:
    """Inputs with size-1 dims in random dim orders, some broadcasting to the others:
    every output, the elementwise ones beside a reduction included, keeps eager's
    strides (TensorIterator's order of the dims sets those of size-1 dims)."""

    def make_arg(rng: random.Random, shape: tuple[int, ...], i: int) -> torch.Tensor:
        return tensor_with_size_one_dims(rng, shape, device, broadcast=i > 0)

    formed = groups_over_random_programs(20261128, 60, SHAPES_WITH_ONES, make_arg)
    assert formed >= 30


MIXED_DTYPES = [torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.float64]


def mixed_tensor(rng: random.Random, shape: tuple[int, ...], dtype: torch.dtype, device: str):
    """A tensor of `shape` and `dtype` in a random layout: contiguous, permuted, sliced,
    or expanded along one dim (values in [-4, 4))."""
    kind = rng.choice(["contiguous", "permuted", "sliced", "expanded"])
    if kind == "expanded":
        dim = rng.randrange(len(shape))
        one = list(shape)
        one[dim] = 1
        return (torch.rand(one, device=device) * 8 - 4).to(dtype).expand(shape)
    t = (torch.rand(shape, device=device) * 8 - 4).to(dtype)
    if kind == "permuted":
        perm = list(range(len(shape)))
        rng.shuffle(perm)
        return t.permute(perm).contiguous().permute([perm.index(d) for d in range(len(shape))])
    if kind == "sliced":
        wide = (torch.rand(*shape[:-1], 2 * shape[-1], device=device) * 8 - 4).to(dtype)
        return wide[..., ::2]
    return t


def mixed_program(rng: random.Random, rank: int) -> str:
    """x0 float32, x1 of another dtype: promoting arithmetic, comparisons converted,
    casts to integers (of infinities too), sums and extremes, softmax of a converted
    value; several values returned."""
    values = ["x0", "x1"]
    lines = []
    for step in range(rng.randint(3, 6)):
        name = f"v{step}"
        a, b = rng.choice(values), rng.choice(values)
        roll = rng.random()
        if roll < 0.3:
            expr = f"{a} {rng.choice(['+', '*', '-'])} {b}"
        elif roll < 0.45:
            expr = f"({a} > {b}).{rng.choice(['float()', 'to(torch.float16)', 'long()'])}"
        elif roll < 0.6:
            expr = f"torch.where({a} > 2.5, {a} / 0.0, {a} * 1.5).{rng.choice(['long()', 'int()'])}"
        elif roll < 0.8:
            kind = rng.choice(["sum", "amax", "amin"])
            expr = f"{a}.{kind}({rng.randrange(rank)}, keepdim=True) + {b}"
        else:
            expr = f"torch.softmax({a}.float() * 0.5, -1)"
        lines.append(f"    {name} = {expr}")
        values.append(name)
    returned = sorted(set(rng.sample(values[2:], min(3, len(values) - 2))) | {values[-1]})
    body = "\n".join(lines)
    return f"def f(x0, x1):\n{body}\n    return ({', '.join(returned)},)\n"


def assert_same_outcome(source: str, args: list[torch.Tensor]) -> bool:
    """Eager and fused agree (shapes, dtypes, strides, values; both raise where eager
    does). Returns whether eager computed a result."""
    try:
        want = eager_from_source(source)(*args)
    except RuntimeError:
        with pytest.raises((RuntimeError, torch.jit.Error)):
            run_optimized(script_from_source(source), *args)
        return False
    got = run_optimized(script_from_source(source), *args)
    for g, w in zip(got, want, strict=True):
        assert (g.shape, g.dtype, g.stride()) == (w.shape, w.dtype, w.stride()), source
        tolerance = 8e-3 if w.dtype in (torch.float16, torch.bfloat16) else 2e-5
        torch.testing.assert_close(g, w, rtol=tolerance, atol=tolerance, equal_nan=True)
    assert not fuser.stats()["cuda_cross_compile_failures"]
    return True


@pytest.mark.parametrize("device", devices())
def test_random_mixed_dtype_programs_match_eager(device: str) -> None:
    """Programs over a float32 and a tensor of another dtype in random layouts (an
    expanded int64 beside a sliced float32, say): promotion, CPU's copies of operands
    into the common dtype, integer casts of infinities, reductions of integers."""
    rng = random.Random(20261129)
    formed = computed = 0
    with fuser.enabled(True):
        for _ in range(60):
            shape = rng.choice([(6, 5, 4), (3, 4, 5, 6), (40, 7)])
            source = mixed_program(rng, len(shape))
            args = [
                mixed_tensor(rng, shape, torch.float32, device),
                mixed_tensor(rng, shape, rng.choice(MIXED_DTYPES), device),
            ]
            fuser.reset_stats()
            computed += assert_same_outcome(source, args)
            formed += fuser.stats()["groups_formed"]
    assert computed >= 50 and formed >= 40
