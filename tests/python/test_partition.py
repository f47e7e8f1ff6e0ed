"""Tests of csrc/passes/partition.cpp (and prepare.cpp): which nodes end up in groups."""

from __future__ import annotations

import os
import subprocess
import sys

import torch
from conftest import fuse_ir, groups, kinds, parse

import fuser
from helpers import run_python


def subgraph_kinds(group: torch._C.Node) -> list[str]:
    return [n.kind() for n in group.g("Subgraph").nodes() if n.kind() != "prim::Constant"]


def test_chain_becomes_one_group() -> None:
    graph = fuse_ir("""
graph(%a : $T, %b : $T):
  %one : int = prim::Constant[value=1]()
  %c : $T = aten::add(%a, %b, %one)
  %d : $T = aten::mul(%c, %b)
  %e : $T = aten::tanh(%d)
  return (%e)""")
    (group,) = groups(graph)
    assert subgraph_kinds(group) == ["aten::add", "aten::mul", "aten::tanh"]
    assert len(list(group.inputs())) == 2
    assert fuser.stats()["groups_formed"] == 1


def test_non_fusible_op_splits_groups() -> None:
    graph = fuse_ir("""
graph(%a : $T, %b : $T, %m : $M):
  %c : $T = aten::mul(%a, %b)
  %d : $T = aten::relu(%c)
  %e : $T = aten::mm(%d, %m)
  %f : $T = aten::sigmoid(%e)
  %g : $T = aten::exp(%f)
  return (%g)""")
    assert [subgraph_kinds(g) for g in groups(graph)] == [
        ["aten::mul", "aten::relu"],
        ["aten::sigmoid", "aten::exp"],
    ]
    assert "aten::mm" in kinds(graph)


def test_arg_limit_splits_a_forty_input_sum() -> None:
    names = [f"%x{i}" for i in range(40)]
    lines = [
        "  %one : int = prim::Constant[value=1]()",
        "  %s1 : $T = aten::add(%x0, %x1, %one)",
    ]
    for i in range(2, 40):
        lines.append(f"  %s{i} : $T = aten::add(%s{i - 1}, %x{i}, %one)")
    ir = "graph(" + ", ".join(f"{n} : $T" for n in names) + "):\n" + "\n".join(lines)
    ir += "\n  return (%s39)"
    fuser.set_arg_limit(8)
    graph = fuse_ir(ir)
    found = groups(graph)
    assert len(found) > 1
    adds = 0
    for group in found:
        assert len(list(group.inputs())) + len(list(group.outputs())) <= 8
        adds += subgraph_kinds(group).count("aten::add")
    assert adds == 39


def test_producer_read_later_becomes_extra_output() -> None:
    graph = fuse_ir("""
graph(%a : $T, %b : $T, %m : $M):
  %c : $T = aten::mul(%a, %b)
  %d : $T = aten::relu(%c)
  %e : $T = aten::mm(%c, %m)
  return (%d, %e)""")
    (group,) = groups(graph)
    assert len(list(group.outputs())) == 2


def test_if_and_loop_blocks_are_fused() -> None:
    graph = fuse_ir("""
graph(%a : $T, %b : $T, %flag : bool, %n : int):
  %r : $T = prim::If(%flag)
    block0():
      %c : $T = aten::mul(%a, %b)
      %d : $T = aten::tanh(%c)
      -> (%d)
    block1():
      %e : $T = aten::neg(%a)
      %f : $T = aten::exp(%e)
      -> (%f)
  %true : bool = prim::Constant[value=1]()
  %out : $T = prim::Loop(%n, %true, %r)
    block0(%i : int, %acc : $T):
      %g : $T = aten::mul(%acc, %b)
      %h : $T = aten::sigmoid(%g)
      -> (%true, %h)
  return (%out)""")
    assert sorted(subgraph_kinds(g)[-1] for g in groups(graph)) == [
        "aten::exp",
        "aten::sigmoid",
        "aten::tanh",
    ]


def test_in_place_on_fresh_value_is_fused() -> None:
    graph = fuse_ir("""
graph(%a : $T, %b : $T):
  %c : $T = aten::mul(%a, %b)
  %d : $T = aten::sigmoid_(%c)
  return (%d)""")
    (group,) = groups(graph)
    assert subgraph_kinds(group) == ["aten::mul", "aten::sigmoid"]


def test_in_place_on_view_is_not_fused() -> None:
    graph = fuse_ir("""
graph(%a : $T, %b : $T):
  %one : int = prim::Constant[value=1]()
  %minus : int = prim::Constant[value=-1]()
  %shape : int[] = prim::ListConstruct(%minus)
  %c : $T = aten::mul(%a, %b)
  %v : Float(20, strides=[1], requires_grad=0, device=cpu) = aten::view(%c, %shape)
  %w : Float(20, strides=[1], requires_grad=0, device=cpu) = aten::add_(%v, %v, %one)
  %d : $T = aten::relu(%c)
  return (%d, %w)""")
    assert groups(graph) == []
    assert "aten::add_" in kinds(graph)


def test_in_place_on_graph_input_stays_in_place() -> None:
    graph = fuse_ir("""
graph(%a : $T, %b : $T):
  %one : int = prim::Constant[value=1]()
  %c : $T = aten::add_(%a, %b, %one)
  %d : $T = aten::relu(%a)
  return (%d)""")
    assert groups(graph) == []
    assert "aten::add_" in kinds(graph)


def test_incomplete_types_form_no_group() -> None:
    graph = parse("""
graph(%a : Tensor, %b : Tensor):
  %c : Tensor = aten::mul(%a, %b)
  %d : Tensor = aten::relu(%c)
  return (%d)""")
    fuser._C.fuse_graph(graph)
    assert groups(graph) == []


def test_singleton_is_dissolved() -> None:
    graph = fuse_ir("""
graph(%a : $T, %m : $M):
  %b : $T = aten::mm(%a, %m)
  %c : $T = aten::relu(%b)
  %d : $T = aten::mm(%c, %m)
  return (%d)""")
    assert groups(graph) == []
    assert fuser.stats()["groups_formed"] == 0


TWO_CHAINS = """
graph(%a : $T, %b : $T, %m : $M):
  %c : $T = aten::mul(%a, %b)
  %d : $T = aten::relu(%c)
  %e : $T = aten::sigmoid(%d)
  %f : $T = aten::mm(%e, %m)
  %g : $T = aten::tanh(%f)
  %h : $T = aten::neg(%g)
  return (%h)"""


def test_groups_below_the_minimum_size_are_dissolved() -> None:
    fuser._C.set_min_group_size(3)
    graph = fuse_ir(TWO_CHAINS)
    (group,) = groups(graph)  # tanh, neg: two nodes, dissolved
    assert subgraph_kinds(group) == ["aten::mul", "aten::relu", "aten::sigmoid"]
    fuser._C.set_min_group_size(4)
    assert groups(fuse_ir(TWO_CHAINS)) == []
    fuser._C.set_min_group_size(2)
    assert len(groups(fuse_ir(TWO_CHAINS))) == 2
    assert fuser.stats()["groups_formed"] == 3


def test_groups_past_the_maximum_are_dissolved_in_program_order() -> None:
    fuser._C.set_max_groups(1)
    graph = fuse_ir(TWO_CHAINS)
    (group,) = groups(graph)
    assert subgraph_kinds(group) == ["aten::mul", "aten::relu", "aten::sigmoid"]
    fuser._C.set_max_groups(0)
    assert len(groups(fuse_ir(TWO_CHAINS))) == 2


def test_min_group_size_and_max_groups_from_the_environment() -> None:
    code = "import fuser; print(fuser._C.get_min_group_size(), fuser._C.get_max_groups())"
    out = run_python(code, {"FUSER_MIN_GROUP_SIZE": "5", "FUSER_MAX_GROUPS": "7"})
    assert out.stdout.split() == ["5", "7"], out.stderr
    bad = run_python(code, {"FUSER_MIN_GROUP_SIZE": "0"})
    assert bad.stdout.split() == ["2", "0"], bad.stderr
    assert "FUSER_MIN_GROUP_SIZE='0' is not understood" in bad.stderr
    single = run_python(code, {"FUSER_SINGLETON": "1"})
    assert single.stdout.split() == ["1", "0"], single.stderr


def test_scripted_function_is_fused_and_correct() -> None:
    @torch.jit.script
    def f(x: torch.Tensor, y: torch.Tensor, n: int) -> torch.Tensor:
        z = x * y + y
        for _ in range(n):
            z = torch.sigmoid(z * 0.5)
        return torch.tanh(z)

    x, y = torch.randn(4, 5), torch.randn(4, 5)
    fuser.enable()
    with torch.no_grad():
        for _ in range(3):
            out = f(x, y, 2)
        graph = torch.jit.last_executed_optimized_graph()
    z = x * y + y
    for _ in range(2):
        z = torch.sigmoid(z * 0.5)
    torch.testing.assert_close(out, torch.tanh(z))
    assert len(groups(graph)) >= 2  # one outside the loop, one inside its body
    assert fuser.stats()["groups_formed"] >= 2


def test_dump_reasons_names_the_refused_node() -> None:
    script = """
import torch, fuser
g = torch._C.parse_ir('''
graph(%a : Float(4, 5, strides=[5, 1], requires_grad=0, device=cpu),
      %m : Float(5, 5, strides=[5, 1], requires_grad=0, device=cpu)):
  %b : Float(4, 5, strides=[5, 1], requires_grad=0, device=cpu) = aten::mm(%a, %m)
  return (%b)''')
fuser._C.fuse_graph(g)
"""
    env = dict(os.environ, FUSER_DUMP="reasons")
    result = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "[fuser] not fused: %" in result.stderr
    assert "aten::mm(%a, %m): operator not in the fusible table: aten::mm" in result.stderr
