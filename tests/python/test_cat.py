"""torch.cat of values a group computes: the group writes each piece into its slice of
the cat's buffer (csrc/passes/concat.cpp, csrc/runtime/kernel_graph.cpp)."""

from __future__ import annotations

import random
from typing import Any

import pytest
import torch

import fuser
from helpers import FUSION_GROUP, devices, run_python, script_from_source

pytestmark = pytest.mark.usefixtures("fused")

TWO = """
def f(a, b):
    x = a * b + 1
    y = torch.relu(a - b)
    return torch.cat([x, y], DIM)
"""

THREE = """
def f(a, b):
    x = a * b + 1
    y = torch.relu(a - b)
    z = (a + 2) * b
    return torch.cat([x, y, z], DIM)
"""


def make(shape: tuple[int, ...], dtype: torch.dtype, device: str) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randn(shape, device=device).to(dtype)
    return torch.randint(-5, 5, shape, device=device, dtype=dtype)


def groups_of(graph: Any) -> list[Any]:
    return graph.findAllNodes(FUSION_GROUP, recurse=True)


def run_fused(source: str, *args: torch.Tensor) -> tuple[Any, Any, int]:
    """Result of three scripted calls, the optimized graph, kernel launches."""
    fn = script_from_source(source)
    before = fuser.stats()["kernel_launches"]
    for _ in range(3):
        out = fn(*args)
    graph = torch.jit.last_executed_optimized_graph()
    return out, graph, fuser.stats()["kernel_launches"] - before


def assert_equal_eager(actual: Any, expected: Any) -> None:
    for a, e in zip(
        actual if isinstance(actual, tuple) else (actual,),
        expected if isinstance(expected, tuple) else (expected,),
        strict=True,
    ):
        assert a.dtype == e.dtype and a.shape == e.shape and a.stride() == e.stride()
        if e.dtype.is_floating_point:
            torch.testing.assert_close(a, e)
        else:
            assert torch.equal(a, e)


def eager(source: str, *args: torch.Tensor) -> Any:
    namespace: dict[str, Any] = {"torch": torch}
    exec(source, namespace)  # noqa: S102 - the reference is the same source, run eagerly
    return namespace["f"](*args)


def assert_cat_fused(graph: Any) -> None:
    (group,) = groups_of(graph)
    kinds = [n.kind() for n in group.g("Subgraph").nodes()]
    assert "aten::cat" in kinds and "prim::ListConstruct" in kinds, graph
    assert fuser.stats()["cuda_cross_compile_failures"] == 0


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("body", [TWO, THREE], ids=["two", "three"])
def test_cat_of_group_values(body: str, dim: int, dtype: torch.dtype, device: str) -> None:
    source = body.replace("DIM", str(dim))
    a, b = make((4, 6), dtype, device), make((4, 6), dtype, device)
    out, graph, launches = run_fused(source, a, b)
    assert_equal_eager(out, eager(source, a, b))
    assert_cat_fused(graph)
    assert launches > 0


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dim", [0, 1, 2, -2])
def test_cat_of_3d_pieces_with_broadcast_and_transposed_input(dim: int, device: str) -> None:
    source = THREE.replace("DIM", str(dim))
    a = make((3, 5, 4), torch.float32, device)
    b = make((4, 5, 3), torch.float32, device).transpose(0, 2)
    out, graph, launches = run_fused(source, a, b)
    assert_equal_eager(out, eager(source, a, b))
    assert_cat_fused(graph)
    assert launches > 0
    # A new size reuses the kernel and still writes every slice.
    a2, b2 = make((2, 7, 4), torch.float32, device), make((2, 7, 4), torch.float32, device)
    fn_out = script_from_source(source)
    for _ in range(3):
        fn_out(a, b)
    assert_equal_eager(fn_out(a2, b2), eager(source, a2, b2))


@pytest.mark.parametrize("device", devices())
def test_cat_and_its_piece_both_returned(device: str) -> None:
    source = """
def f(a, b):
    x = a * b
    y = x + a
    return torch.cat([x, y], 1), x
"""
    a, b = make((5, 3), torch.float32, device), make((5, 3), torch.float32, device)
    out, graph, launches = run_fused(source, a, b)
    assert_equal_eager(out, eager(source, a, b))
    assert_cat_fused(graph)
    assert launches > 0


def test_pieces_of_different_dtypes_fall_back_equal_to_eager() -> None:
    source = """
def f(a, b):
    x = a * 2
    y = b + 1
    return torch.cat([x, y], 0)
"""
    a, b = make((4, 5), torch.float32, "cpu"), make((4, 5), torch.int64, "cpu")
    out, graph, _ = run_fused(source, a, b)
    assert_equal_eager(out, eager(source, a, b))
    for group in groups_of(graph):
        assert "aten::cat" not in [n.kind() for n in group.g("Subgraph").nodes()]


@pytest.mark.parametrize(
    "body",
    [
        # the cat's result is read by a fusible node: it would be read inside a group
        "x = a * b\n    y = a - b\n    return torch.relu(torch.cat([x, y], 0))",
        # pieces of different sizes along dim
        "x = a * b\n    y = (a - b)[:2]\n    return torch.cat([x, y], 0)",
        # no piece computed by a fusible node: the cat would be a copy
        "y = torch.mm(a.t(), b)[:4]\n    return torch.cat([a[:, :2], y[:, 3:]], 1)",
    ],
    ids=["read_inside", "different_sizes", "only_copies"],
)
def test_refused_cats_stay_equal_to_eager(body: str, request: Any) -> None:
    source = "def f(a, b):\n    " + body + "\n"
    a, b = make((4, 5), torch.float32, "cpu"), make((4, 5), torch.float32, "cpu")
    out, graph, _ = run_fused(source, a, b)
    assert_equal_eager(out, eager(source, a, b))
    for group in groups_of(graph):
        for node in group.g("Subgraph").findAllNodes("aten::cat"):
            # only the read-inside case fuses its cat, then as a group of its own
            assert "read_inside" in request.node.name
            assert all(use.user.kind() == "prim::Return" for use in node.output().uses())


# Rotary position embeddings as transformers writes them: the second half of the head
# dim negated, then the first, each a slice of the input the group does not compute.
ROTARY = """
def f(q, cos, sin):
    half = q.size(-1) // 2
    x1 = q[..., :half]
    x2 = q[..., half:]
    return q * cos + torch.cat((-x2, x1), dim=-1) * sin
"""


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_a_piece_the_group_does_not_compute_is_copied_by_its_kernel(
    device: str, dtype: torch.dtype
) -> None:
    q = make((2, 4, 8, 16), dtype, device).transpose(1, 2)  # a head-split projection
    cos, sin = make((1, 8, 1, 16), dtype, device), make((1, 8, 1, 16), dtype, device)
    out, graph, _ = run_fused(ROTARY, q, cos, sin)
    assert_equal_eager(out, eager(ROTARY, q, cos, sin))
    cat_groups = [g for g in groups_of(graph) if g.g("Subgraph").findAllNodes("aten::cat")]
    assert len(cat_groups) == 1, graph
    subgraph = cat_groups[0].g("Subgraph")
    assert subgraph.findAllNodes("aten::neg") and subgraph.findAllNodes("aten::contiguous")
    assert not graph.findAllNodes("aten::neg") and not graph.findAllNodes("aten::cat")


def random_cat_program(rng: random.Random, rank: int) -> str:
    """f(a, b, c) returning a cat along a random dim of 2-3 pieces of a's shape, one at
    least computed by fusible ops, the others computed or not computed by the group: an
    input itself, a transpose (of equal sides), slices of c (two longer along dim 0)."""
    computed = ["a * b + 1.0", "torch.relu(a - c[1:-1])", "torch.sigmoid(b) * 2.0", "-c[2:]"]
    uncomputed = ["a", "b", "a.transpose(0, 1)", "c[1:-1]", "c[:-2]"]
    pieces = [rng.choice(computed)]
    pieces += [rng.choice(uncomputed + computed) for _ in range(rng.randint(1, 2))]
    rng.shuffle(pieces)
    dim = rng.randint(-rank, rank - 1)
    names = [f"p{i}" for i in range(len(pieces))]
    body = "".join(f"    {n} = {p}\n" for n, p in zip(names, pieces, strict=True))
    return f"def f(a, b, c):\n{body}    return torch.cat([{', '.join(names)}], {dim})\n"


@pytest.mark.parametrize("device", devices())
def test_random_cats_with_pieces_the_group_does_not_compute_match_eager(device: str) -> None:
    rng = random.Random(20261128)
    copied = 0  # programs whose kernel copies a piece it does not compute
    for _ in range(10):
        rank = rng.randint(2, 4)
        side = rng.randint(2, 5)
        shape = (side, side, *[rng.randint(1, 4) for _ in range(rank - 2)])
        source = random_cat_program(rng, rank)
        a, b = make(shape, torch.float32, device), make(shape, torch.float32, device)
        c = make((side + 2, *shape[1:]), torch.float32, device)
        out, graph, _ = run_fused(source, a, b, c)
        assert_equal_eager(out, eager(source, a, b, c))
        subgraphs = [g.g("Subgraph") for g in groups_of(graph)]
        copied += any(s.findAllNodes("aten::contiguous") for s in subgraphs)
    assert copied >= 3, copied


def test_refusal_reason_is_printed_under_dump_reasons() -> None:
    program = """
import torch, fuser
fuser.enable()
@torch.jit.script
def f(x, y):
    return torch.cat([x.sigmoid() * 2, y.tanh() + 1], 1)
x, y = torch.randn(4, 3), torch.randn(4, 5)
for _ in range(3):
    out = f(x, y)
torch.testing.assert_close(out, torch.cat([x.sigmoid() * 2, y.tanh() + 1], 1))
"""
    result = run_python(program, {"FUSER_DUMP": "reasons"})
    assert result.returncode == 0, result.stderr
    assert "not fused: " in result.stderr and "aten::cat" in result.stderr
    assert "differs in size from the first piece" in result.stderr
