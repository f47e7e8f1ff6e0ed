"""Two elementwise groups that read one tensor, neither reading the other, whose outputs
have one shape, become one group (passes/partition.cpp: mergeOneSiblingPair): one kernel,
one guard and one launch. Rotary position embeddings of the query beside those of the key
(both read cos and sin) are the case real models meet. tests/cpp/test_passes.cpp checks
which graphs merge."""

from __future__ import annotations

import random
from typing import Any

import pytest
import torch
from test_output_layout import random_shape, random_tensor

from helpers import FUSION_GROUP, devices, eager_from_source, run_python, script_from_source

pytestmark = pytest.mark.usefixtures("fused")

# transformers' apply_rotary_pos_emb: the query and the key each rotated by cos and sin.
ROTARY_QUERY_AND_KEY = """
def f(q, k, cos, sin):
    half = q.size(-1) // 2
    q_rotated = torch.cat((-q[..., half:], q[..., :half]), dim=-1)
    k_rotated = torch.cat((-k[..., half:], k[..., :half]), dim=-1)
    return q * cos + q_rotated * sin, k * cos + k_rotated * sin
"""

# A [4, 5] result and a [5] one, both of c: no one shape for one kernel to write over.
OTHER_SHAPES = """
def f(a, c):
    return a * c + 1.0, torch.sigmoid(c * 2.0)
"""


def groups_of(graph: Any) -> list[Any]:
    return graph.findAllNodes(FUSION_GROUP, recurse=True)


def fused_run(source: str, *args: torch.Tensor) -> tuple[tuple[torch.Tensor, ...], Any]:
    fn = script_from_source(source)
    for _ in range(3):
        out = fn(*args)
    return out, torch.jit.last_executed_optimized_graph()


def assert_equal_eager(got: tuple[torch.Tensor, ...], want: tuple[torch.Tensor, ...]) -> None:
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape and g.stride() == w.stride()
        if g.dtype == torch.float32:
            torch.testing.assert_close(g, w)  # within tolerance (contracted multiply-adds)
        else:
            assert torch.equal(g, w)  # 16-bit results round as eager's do


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_rotary_embeddings_of_query_and_key_are_one_group(device: str, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    # Head-split projections ([B, T, H, D] transposed), cos and sin broadcast over heads.
    q, k = (torch.randn(2, 8, 4, 16, device=device, dtype=dtype).transpose(1, 2) for _ in "qk")
    cos, sin = (torch.randn(2, 1, 8, 16, device=device, dtype=dtype) for _ in "cs")
    got, graph = fused_run(ROTARY_QUERY_AND_KEY, q, k, cos, sin)
    assert_equal_eager(got, eager_from_source(ROTARY_QUERY_AND_KEY)(q, k, cos, sin))
    groups = groups_of(graph)
    products = [g for g in groups if not g.g("Subgraph").findAllNodes("aten::cat")]
    # Each rotation's cat is a group of its own (a cat is a group's output, read by none
    # of its nodes); the two products with cos and sin are one group with both results.
    assert len(groups) == 3, graph
    assert len(products) == 1 and len(list(products[0].outputs())) == 2, graph


@pytest.mark.parametrize("device", devices())
def test_siblings_of_other_shapes_stay_apart(device: str) -> None:
    a = torch.randn(4, 5, device=device)
    c = torch.randn(5, device=device)
    got, graph = fused_run(OTHER_SHAPES, a, c)
    want = eager_from_source(OTHER_SHAPES)(a, c)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.stride() == w.stride()
        torch.testing.assert_close(g, w)
    assert len(groups_of(graph)) == 2, graph


def test_fuser_sibling_groups_0_keeps_them_apart() -> None:
    code = """
import torch, fuser
torch._C._jit_set_num_profiled_runs(1)
fuser.enable()
f = torch.jit.CompilationUnit('''
def f(a, b, c):
    return a * c + c, b * c + c
''').f
a, b, c = torch.randn(3, 4, 5).unbind(0)
with torch.no_grad():
    for _ in range(3):
        x, y = f(a, b, c)
# assert_close's float32 tolerance: a fused multiply-add may round once where eager
# rounds twice, which is far beyond allclose's bare rtol where a * c + c cancels.
torch.testing.assert_close(x, a * c + c)
torch.testing.assert_close(y, b * c + c)
graph = torch.jit.last_executed_optimized_graph()
print(len(graph.findAllNodes("fuser::FusionGroup", recurse=True)))
"""
    merged = run_python(code)
    apart = run_python(code, {"FUSER_SIBLING_GROUPS": "0"})
    assert merged.returncode == 0 and apart.returncode == 0, merged.stderr + apart.stderr
    assert merged.stdout.split() == ["1"]
    assert apart.stdout.split() == ["2"]


# ---- seeded random siblings ---------------------------------------------------------

SIBLING_UNARY = ["exp", "relu", "sigmoid", "neg", "tanh", "abs"]
SIBLING_BINARY = ["+", "-", "*", "torch.maximum"]


def random_sibling_program(rng: random.Random, chains: int) -> str:
    """f(s, x0, ..., x{chains-1}): independent chains of one to three elementwise steps,
    each reading the shared `s` and its own x, all results returned."""
    lines, outs = [], []
    for c in range(chains):
        value = rng.choice([f"x{c}", "s"])
        other = "s" if value != "s" else f"x{c}"
        for step in range(rng.randint(1, 3)):
            name = f"c{c}_{step}"
            if step == 0 or rng.random() < 0.5:
                op = rng.choice(SIBLING_BINARY)
                operand = other if step == 0 else rng.choice([other, "s", "1.5"])
                if op.startswith("torch."):
                    operand = operand if operand != "1.5" else value
                    expr = f"{op}({value}, {operand})"
                else:
                    expr = f"{value} {op} {operand}"
            else:
                expr = f"torch.{rng.choice(SIBLING_UNARY)}({value})"
            lines.append(f"    {name} = {expr}")
            value = name
        outs.append(value)
    inputs = ", ".join(["s"] + [f"x{c}" for c in range(chains)])
    return f"def f({inputs}):\n" + "\n".join(lines) + f"\n    return ({', '.join(outs)},)\n"


@pytest.mark.parametrize("device", devices())
def test_random_siblings_match_eager(device: str) -> None:
    """Chains that read one tensor, in layouts and broadcasts of every kind: eager's
    shapes, dtypes, strides and values, whether or not their groups merged."""
    rng = random.Random(20261128)
    merged = 0  # programs with fewer groups than chains
    for _ in range(24):
        chains = rng.randint(2, 4)
        source = random_sibling_program(rng, chains)
        base = rng.choice([(3, 4, 5), (2, 3, 4, 5), (6, 7)])
        shapes = [random_shape(rng, base) for _ in range(chains + 1)]
        args = [random_tensor(rng, shape, device) for shape in shapes]
        fused = script_from_source(source)
        for _ in range(3):
            got = fused(*args)
        graph = torch.jit.last_executed_optimized_graph()
        want = eager_from_source(source)(*args)
        for g, w in zip(got, want, strict=True):
            assert g.shape == w.shape and g.dtype == w.dtype, source
            assert g.stride() == w.stride(), (source, g.stride(), w.stride())
            torch.testing.assert_close(g, w)
        merged += len(groups_of(graph)) < chains
    assert merged >= 6, merged  # the merge is exercised, not only passed by
