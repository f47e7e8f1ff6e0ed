"""Seeded random training programs against eager: elementwise steps, biases and scales
broadcast along rows, residual adds, layer_norm, softmax, row means and leading-dims
sums, run forward and backward. autodiff's backward graphs hold what the partition
finds hardest (layer_norm's input gradient, `_grad_sum_to_size` of broadcast operands,
leading-dims sums beside rows, sibling gradients), so every output and every input's
gradient must be eager's: shape and dtype, strides (TorchScript's without the fuser,
where its autodiff lays a gradient out otherwise than eager's autograd; a transposed
input's gradient only dense, see difference_from_eager), and values no farther from
the float64 result than eager's own allow."""

from __future__ import annotations

import math
import random

import pytest
import torch

import fuser
from helpers import devices, eager_from_source, script_from_source

SHAPES = [(6, 8), (2, 5, 12), (33, 37), (4, 3, 64)]
UNARY = ["torch.tanh", "torch.sigmoid", "torch.relu", "torch.nn.functional.silu"]
# Steps that keep a full-shape value; `{a}`/`{b}` are full-shape values, `{p}` a row
# parameter (one element per column), `w` a square weight (a linear layer's, GEMMs
# between groups), `{row}` the normalized shape.
STEPS = [
    "{u}({a})",
    "{a} + {b}",
    "{a} * {b}",
    "{a} - {p}",
    "{a} * {p} + {q}",
    "torch.layer_norm({a}, {row}, {p}, {q}, 1e-5)",
    "torch.layer_norm({a}, {row}, None, None, 1e-5)",
    "torch.softmax({a}, -1)",
    "{a} - {a}.mean(-1, keepdim=True)",
    "0.5 * {a} * (1.0 + torch.tanh(0.79788456 * ({a} + 0.044715 * {a} * {a} * {a})))",
    "torch.nn.functional.gelu({a})",
    "torch.exp(torch.tanh({a}))",
    "torch.log_softmax({a}, -1)",
    "{a} / ({p} * {p} + 1.0)",
    "{a} * torch.rsqrt(({a} * {a}).mean(-1, keepdim=True) + 1e-6) * {p}",
    "({a} - {a}.mean(-1, keepdim=True)) / torch.sqrt({a}.var(-1, keepdim=True) + 1e-5)",
    "torch.nn.functional.linear({a}, w, {p})",
    "torch.relu(torch.matmul({a}, w) + {p})",
    "torch.sigmoid({a}.transpose(0, 1)).transpose(0, 1) * {b}",
    "torch.dropout({a}, 0.0, True) + {b}",
]
# How far from the float64 result a value may be beyond four times eager's distance, as
# a share of the result's largest magnitude.
SCALE_SHARE = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 4e-2}
# Values a program may return besides full-shape ones.
REDUCED = ["{a}.sum(-1)", "{a}.mean(-1, keepdim=True)", "{a}.sum({lead})"]


def random_program(rng: random.Random, rank: int) -> tuple[str, int, int]:
    """Source of `f(x0..xN, p0..pM, w)`: N full-shape inputs, M row parameters and a
    square weight, all of which take gradients; a few steps; full-shape and reduced
    values returned."""
    num_full = rng.randint(1, 3)
    num_params = rng.randint(1, 3)
    full = [f"x{i}" for i in range(num_full)]
    params = [f"p{i}" for i in range(num_params)]
    lead = list(range(rank - 1))
    lines: list[str] = []
    returned: list[str] = []
    for step in range(rng.randint(3, 7)):
        name = f"v{step}"
        text = rng.choice(STEPS).format(
            u=rng.choice(UNARY),
            a=rng.choice(full[-3:]),
            b=rng.choice(full),
            p=rng.choice(params),
            q=rng.choice(params),
            row="[" + "{n}" + "]",
        )
        lines.append(f"    {name} = {text}")
        full.append(name)
        if rng.random() < 0.25:
            reduced = rng.choice(REDUCED).format(a=name, lead=lead)
            lines.append(f"    {name}r = {reduced}")
            returned.append(f"{name}r")
        if rng.random() < 0.3:
            returned.append(name)
    returned.append(full[-1])
    signature = ", ".join(full[:num_full] + params + ["w"])
    body = "\n".join(lines)
    outs = ", ".join(dict.fromkeys(returned))
    return f"def f({signature}):\n{body}\n    return ({outs},)\n", num_full, num_params


def program_inputs(
    rng: random.Random, shape: tuple[int, ...], num_full: int, num_params: int, device: str
) -> list[torch.Tensor]:
    """Full-shape inputs, some of them transposed in memory (the first two dims), and row
    parameters; float32 mostly, else all float16 or all bfloat16."""
    g = torch.Generator().manual_seed(rng.randrange(1 << 30))
    dtype = rng.choice([torch.float32] * 4 + [torch.float16, torch.bfloat16])
    full = []
    for _ in range(num_full):
        if rng.random() < 0.3:
            full.append(torch.randn(shape[1], shape[0], *shape[2:], generator=g).transpose(0, 1))
        else:
            full.append(torch.randn(*shape, generator=g))
    params = [torch.randn(shape[-1], generator=g) + 1.0 for _ in range(num_params)]
    weight = torch.randn(shape[-1], shape[-1], generator=g) / shape[-1] ** 0.5
    return [t.to(device, dtype) for t in full + params + [weight]]


def training_step(fn, args: list[torch.Tensor], seed: int, calls: int) -> list[torch.Tensor]:
    """The outputs of `fn` and the gradient of every input, from upstream gradients
    drawn with `seed` (the same for every caller), after `calls` calls."""
    with torch.autograd.set_multithreading_enabled(False):
        for _ in range(calls):
            ours = [a.detach().clone().requires_grad_() for a in args]
            outs = fn(*ours)
            g = torch.Generator().manual_seed(seed)
            upstream = [torch.randn(o.shape, generator=g).to(o) for o in outs]
            grads = torch.autograd.grad(outs, ours, upstream, allow_unused=True)
        results = [o.detach() for o in outs]
        return results + [
            torch.zeros_like(a) if d is None else d for a, d in zip(args, grads, strict=True)
        ]


def difference_from_eager(
    source: str, args: list[torch.Tensor], seed: int, strict_layouts: bool = False
) -> str | None:
    """How the fused training step's results differ, or None. Shapes and dtypes are
    eager's. Outputs have TorchScript's strides without the fuser (that graph is what
    the fuser replaces); a gradient has those or eager's (TorchScript's autodiff sums a
    gradient in another order than eager's autograd and may lay it out otherwise).
    Where an input is transposed, a gradient is only held dense: the fused backward can
    lay it out as neither does, a known difference (`strict_layouts`, or
    `tools/fuzz_training.py --strict-layouts`, reports it). A value may differ from
    eager's by reassociation: its distance from the float64 result must stay within four
    times eager's plus a share of the result's scale (SCALE_SHARE: a sum that cancels to
    nothing rounds differently when reassociated, and in 16 bits a layer_norm's backward
    magnifies an intermediate's other rounding by its rstd). Where eager's own value is
    not finite and the float64 one is, TorchScript's without the fuser stands for eager's;
    where neither is, ours must be not finite at eager's elements and near elsewhere."""
    with fuser.enabled(False):
        unfused = training_step(script_from_source(source), args, seed, calls=4)
    fuser.reset_stats()
    got = training_step(script_from_source(source), args, seed, calls=4)
    stats = fuser.stats()
    want = training_step(eager_from_source(source), args, seed, calls=1)
    exact = training_step(eager_from_source(source), [a.double() for a in args], seed, 1)
    outputs = len(got) - len(args)
    transposed = not all(a.is_contiguous() for a in args)
    for i, (g, u, w, e) in enumerate(zip(got, unfused, want, exact, strict=True)):
        layouts = [u.stride()] if i < outputs else [u.stride(), w.stride()]
        dense_gradient = i >= outputs and transposed and not strict_layouts and dense(g)
        if (g.shape, g.dtype) != (w.shape, w.dtype) or (
            g.stride() not in layouts and not dense_gradient
        ):
            return (
                f"result {i}: {(g.shape, g.dtype, g.stride())} vs {(w.shape, w.dtype)}, {layouts}"
            )
        ours = (g.double() - e).abs().max().item() if g.numel() else 0.0
        eagers = (w.double() - e).abs().max().item() if w.numel() else 0.0
        if not math.isfinite(eagers):
            # Eager's float32 step can be NaN where the float64 one is not (seed 110 of
            # tools/fuzz_training.py: 448 NaNs in a gradient through softmax and rsqrt,
            # without the fuser loaded); TorchScript's own float32 step is the measure.
            eagers = (u.double() - e).abs().max().item() if u.numel() else 0.0
        if not math.isfinite(eagers):
            # Both are NaN or infinite where float64 is not (seed 9103: log_softmax of a
            # log_softmax, whose gradient overflows in float32): ours must be so at the
            # same elements, and as near float64 as theirs elsewhere.
            lost = ~w.isfinite()
            if not torch.equal(~g.isfinite(), lost) or not torch.equal(~u.isfinite(), lost):
                return f"result {i}: not finite at other elements than eager's"
            kept = ~lost
            ours = distance_where(g, e, kept)
            eagers = max(distance_where(w, e, kept), distance_where(u, e, kept))
        scale = e.abs().max().item() if e.numel() else 0.0
        if not ours <= 4 * eagers + SCALE_SHARE[g.dtype] * (1.0 + scale):
            return f"result {i}: off float64 by {ours:.3g} (eager {eagers:.3g}, scale {scale:.3g})"
    if stats["interpreted_runs"]:
        return f"{stats['interpreted_runs']} group calls interpreted"
    if stats["cuda_cross_compile_failures"]:
        return "a CUDA cross-compile failed"
    return None


def distance_where(t: torch.Tensor, exact: torch.Tensor, kept: torch.Tensor) -> float:
    """The largest distance of `t` from `exact` over the elements `kept` marks (0 if none)."""
    return (t.double() - exact)[kept].abs().max().item() if kept.any() else 0.0


def dense(t: torch.Tensor) -> bool:
    """Every element at its own offset, the offsets filling a range (any dim order)."""
    dims = sorted((s, n) for s, n in zip(t.stride(), t.shape, strict=True) if n > 1)
    expected = 1
    for stride, size in dims:
        if stride != expected:
            return False
        expected *= size
    return True


def random_case(rng: random.Random, device: str) -> tuple[str, list[torch.Tensor], int]:
    shape = rng.choice(SHAPES)
    source, num_full, num_params = random_program(rng, len(shape))
    source = source.replace("{n}", str(shape[-1]))
    return source, program_inputs(rng, shape, num_full, num_params, device), rng.randrange(1000)


@pytest.mark.parametrize("column_sums", [False, True], ids=["default", "column_sums_all"])
@pytest.mark.parametrize("device", devices())
def test_random_training_programs_match_eager(device: str, column_sums: bool) -> None:
    """On CPU also with column sums joining row groups (FUSER_COLUMN_SUMS=all), the
    CUDA partition's choice, whose CPU kernels write the summed operands whole."""
    rng = random.Random(20261127)
    formed = 0
    fuser._C._set_column_sums(True, column_sums)
    try:
        with fuser.enabled(True):
            for _ in range(16):
                source, args, seed = random_case(rng, device)
                why = difference_from_eager(source, args, seed)
                assert why is None, (source, why)
                formed += fuser.stats()["groups_formed"]
    finally:
        fuser._C._set_column_sums(True, False)
    assert formed >= 16  # most programs form groups in their forward and backward
