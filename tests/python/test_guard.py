"""Tests of csrc/passes/guard.cpp and the fuser::TypeGuard operator."""

from __future__ import annotations

import pytest
import torch
from conftest import fuse_ir, groups, kinds

import fuser
from helpers import eager_from_source, run_optimized, script_from_source

CHAIN = """
graph(%a : $T, %b : $T):
  %c : $T = aten::mul(%a, %b)
  %d : $T = aten::tanh(%c)
  return (%d)"""


def test_group_sits_under_type_guard_with_fallback() -> None:
    graph = fuse_ir(CHAIN)
    nodes = list(graph.nodes())
    assert [n.kind() for n in nodes] == ["fuser::TypeGuard", "prim::If"]
    guard, branch = nodes
    types = guard.tys("types")
    assert len(types) == 2
    for t in types:
        assert (t.scalarType(), t.sizes(), t.device()) == (
            "Float",
            [4, 5],
            torch.device("cpu"),
        )
    assert branch.input().node() == guard
    fused_block, fallback_block = branch.blocks()
    (group,) = fused_block.nodes()
    (fallback,) = fallback_block.nodes()
    assert group.kind() == "fuser::FusionGroup"
    assert fallback.kind() == "prim::FallbackGraph"
    assert list(fallback.inputs()) == list(group.inputs()) == list(guard.inputs())
    fallback_ops = [n.kind() for n in fallback.g("Subgraph").nodes()]
    assert fallback_ops == ["aten::mul", "aten::tanh"]


def test_types_wiped_outside_groups_only() -> None:
    graph = fuse_ir(CHAIN)
    assert all(str(v.type()) == "Tensor" for v in graph.inputs())
    (group,) = groups(graph)
    inner = group.g("Subgraph")
    assert all(v.type().scalarType() == "Float" for v in inner.inputs())
    assert all(v.type().sizes() == [4, 5] for v in inner.inputs())


def test_fusing_twice_is_harmless() -> None:
    graph = fuse_ir(CHAIN)
    once = str(graph)
    fuser._C.fuse_graph(graph)
    assert str(graph) == once
    assert fuser.stats()["groups_formed"] == 1


def _scripted():
    @torch.jit.script
    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(torch.relu(x * y + y))

    return f


def _eager(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(torch.relu(x * y + y))


def _warm(f, *args) -> None:
    for _ in range(3):
        f(*args)


def test_new_batch_size_passes_the_guard() -> None:
    f = _scripted()
    fuser.enable()
    with torch.no_grad():
        _warm(f, torch.randn(4, 5), torch.randn(4, 5))
        assert groups(torch.jit.last_executed_optimized_graph())
        x, y = torch.randn(9, 5), torch.randn(9, 5)
        torch.testing.assert_close(f(x, y), _eager(x, y))
    assert fuser.stats()["guard_failures"] == 0


def test_dtype_change_fails_the_guard_and_runs_the_fallback() -> None:
    f = _scripted()
    fuser.enable()
    with torch.no_grad():
        _warm(f, torch.randn(4, 5), torch.randn(4, 5))
        x, y = (
            torch.randn(4, 5, dtype=torch.double),
            torch.randn(4, 5, dtype=torch.double),
        )
        out = f(x, y)
    assert out.dtype == torch.double
    torch.testing.assert_close(out, _eager(x, y))
    assert fuser.stats()["guard_failures"] >= 1


def test_rank_change_fails_the_guard() -> None:
    f = _scripted()
    fuser.enable()
    with torch.no_grad():
        _warm(f, torch.randn(4, 5), torch.randn(4, 5))
        x, y = torch.randn(2, 4, 5), torch.randn(2, 4, 5)
        torch.testing.assert_close(f(x, y), _eager(x, y))
    assert fuser.stats()["guard_failures"] >= 1


def test_inputs_needing_grad_still_get_gradients() -> None:
    f = _scripted()
    fuser.enable()
    x, y = torch.randn(4, 5, requires_grad=True), torch.randn(4, 5, requires_grad=True)
    for _ in range(3):
        out = f(x, y)
        out.sum().backward()
    x2, y2 = x.detach().requires_grad_(), y.detach().requires_grad_()
    _eager(x2, y2).sum().backward()
    torch.testing.assert_close(out, _eager(x, y))
    torch.testing.assert_close(x.grad / 3, x2.grad)
    torch.testing.assert_close(y.grad / 3, y2.grad)


# A same-dtype conversion then a contiguous copy of a row-major input: eager answers the
# input itself for both, so the guard unmerges the group the partition formed of them.
ALIASES_ONLY = """
graph(%a : $T):
  %none : NoneType = prim::Constant()
  %false : bool = prim::Constant[value=0]()
  %float : int = prim::Constant[value=6]()
  %format : int = prim::Constant[value=0]()
  %c : $T = aten::to(%a, %float, %false, %false, %none)
  %d : $T = aten::contiguous(%c, %format)
  %e : $T = aten::to(%d, %float, %false, %false, %none)
  return (%e)"""


def test_a_group_the_guard_unmerges_is_not_counted() -> None:
    graph = fuse_ir(ALIASES_ONLY)
    assert groups(graph) == []
    assert "aten::contiguous" in kinds(graph)
    assert fuser.stats()["groups_formed"] == 0


def test_ops_read_only_for_their_size_still_raise_where_eager_raises() -> None:
    """`(a - b) * 2` read only for its shape: profiled on int32, then called with bool
    tensors, where eager's subtraction raises. The group stays (its guard sends the call
    to the fallback, which raises), instead of a size expression that would return."""
    text = "def f(a, b):\n    v = (a - b) * 2\n    return a.new_ones(v.shape)\n"
    fn = script_from_source(text)
    a, b = (
        torch.randint(0, 5, (3, 4), dtype=torch.int32),
        torch.randint(0, 5, (4,), dtype=torch.int32),
    )
    bool_subtraction = "Subtraction, the `-` operator, with (a|two) bool tensors? is not supported"
    with fuser.enabled(True):
        torch.testing.assert_close(run_optimized(fn, a, b), torch.ones(3, 4, dtype=torch.int32))
        with pytest.raises(RuntimeError, match=bool_subtraction):
            eager_from_source(text)(a > 2, b > 2)
        with pytest.raises(RuntimeError, match=bool_subtraction):
            fn(a > 2, b > 2)
