"""CUDA kernels take their arguments in a 4 KB parameter space (passes/param_space.cpp):
the partition keeps each group's inputs within it, and a group whose outputs would
overflow it is split into groups that share its inputs, each writing some outputs."""

from __future__ import annotations

import pytest
import torch

import fuser
from helpers import FUSION_GROUP, run_optimized, script_from_source

RANK6 = "Float(2, 3, 2, 3, 2, 2, strides=[144, 48, 24, 8, 4, 1], requires_grad=0, device={dev})"


def many_outputs_ir(count: int, device: str) -> str:
    """`count` outputs m_i = x * (i + 1) + y of rank-6 tensors, all summed into one more:
    one group of two inputs and count + 1 outputs."""
    t = RANK6.format(dev=device)
    lines = ["  %alpha : int = prim::Constant[value=1]()"]
    total = None
    for i in range(count):
        lines.append(f"  %c{i} : float = prim::Constant[value={i + 1}.]()")
        lines.append(f"  %p{i} : {t} = aten::mul(%x, %c{i})")
        lines.append(f"  %m{i} : {t} = aten::add(%p{i}, %y, %alpha)")
        if total is None:
            total = f"%m{i}"
        else:
            lines.append(f"  %s{i} : {t} = aten::add({total}, %m{i}, %alpha)")
            total = f"%s{i}"
    outputs = ", ".join([f"%m{i}" for i in range(count)] + [total])
    return f"graph(%x : {t}, %y : {t}):\n" + "\n".join(lines) + f"\n  return ({outputs})\n"


def fused_groups(ir: str) -> tuple[torch._C.Graph, list[torch._C.Node]]:
    graph = torch._C.parse_ir(ir)
    fuser._C.fuse_graph(graph)
    torch._C._jit_pass_lint(graph)  # topological order, uses and definitions agree
    return graph, graph.findAllNodes(FUSION_GROUP, recurse=True)


def test_rank6_group_past_the_parameter_space_is_split_by_outputs() -> None:
    fuser.set_arg_limit(256)
    unsplit, (whole,) = fused_groups(many_outputs_ir(100, "cpu"))
    limit = fuser._C.cuda_param_bytes_limit()
    assert fuser._C.group_param_bytes(whole) > limit
    graph, groups = fused_groups(many_outputs_ir(100, "cuda:0"))
    assert len(groups) >= 2
    assert all(fuser._C.group_param_bytes(g) <= limit for g in groups)
    # The groups share the inputs; the 101 outputs are split among them, each returned
    # through its group's guard.
    for g in groups:
        assert sorted(v.debugName() for v in g.inputs()) == ["x", "y"]
    assert sum(len(list(g.outputs())) for g in groups) == 101
    guards = {g.owningBlock().owningNode() for g in groups}
    returned = list(graph.return_node().inputs())
    assert len(returned) == 101
    assert all(v.node() in guards for v in returned)


def test_cpu_groups_are_not_split() -> None:
    fuser.set_arg_limit(256)
    _, groups = fused_groups(many_outputs_ir(100, "cpu"))
    assert len(groups) == 1
    assert len(list(groups[0].outputs())) == 101


def test_partition_refuses_inputs_past_the_parameter_space() -> None:
    # One output reading 100 rank-6 inputs: no split by outputs can help, so the
    # partition stops merging before the inputs overflow.
    t = RANK6.format(dev="cuda:0")
    params = ", ".join(f"%x{i} : {t}" for i in range(100))
    lines, last = [], "%x0"
    for i in range(1, 100):
        lines.append(f"  %s{i} : {t} = aten::mul({last}, %x{i})")
        last = f"%s{i}"
    ir = f"graph({params}):\n" + "\n".join(lines) + f"\n  return ({last})\n"
    fuser.set_arg_limit(256)
    _, groups = fused_groups(ir)
    limit = fuser._C.cuda_param_bytes_limit()
    assert len(groups) >= 2
    assert all(fuser._C.group_param_bytes(g) <= limit for g in groups)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_split_groups_run_on_cuda_and_match_eager(fused) -> None:
    fuser.set_arg_limit(256)
    count = 100
    body = "\n".join(f"    m{i} = x * {i + 1}.0 + y" for i in range(count))
    total = " + ".join(f"m{i}" for i in range(count))
    returned = ", ".join(f"m{i}" for i in range(count))
    source = f"def f(x, y):\n{body}\n    s = {total}\n    return ({returned}, s.relu())\n"
    x = torch.randn(2, 2, 2, 3, 3, 2, device="cuda").transpose(1, 4)
    y = torch.randn(2, 2, 2, 3, 3, 2, device="cuda").permute(0, 4, 2, 3, 1, 5)
    fn = script_from_source(source)  # alive: its optimized graph is read below
    out = run_optimized(fn, x, y)
    for i in range(count):
        want = x * (i + 1.0) + y
        torch.testing.assert_close(out[i], want)
        assert out[i].stride() == want.stride()
    torch.testing.assert_close(out[-1], sum(x * (i + 1.0) + y for i in range(count)).relu())
    # The partition may form one group (the chains read the same x and y); the groups
    # that run are several, each within the parameter space, and every one compiled.
    groups = torch.jit.last_executed_optimized_graph().findAllNodes(FUSION_GROUP, recurse=True)
    limit = fuser._C.cuda_param_bytes_limit()
    assert len(groups) >= 2
    assert all(fuser._C.group_param_bytes(g) <= limit for g in groups)
    stats = fuser.stats()
    assert stats["compile_failures"] == 0 and stats["interpreted_runs"] == 0


def test_a_batch_norm_statistic_read_elsewhere_counts_twice() -> None:
    """The kernel reads a batch_norm statistic per channel through an input of its own;
    read along the last dim as well, it is a second kernel input (runtime/kernel_graph.h)."""
    t = "Float(2, 4, 4, strides=[16, 4, 1], requires_grad=0, device=cpu)"
    s = "Float(4, strides=[1], requires_grad=0, device=cpu)"

    def group_bytes(extra_use: bool) -> int:
        tail = "aten::add(%y, %m, %one)" if extra_use else "aten::relu(%y)"
        ir = (
            f"graph(%x : {t}, %w : {s}, %b : {s}, %m : {s}, %v : {s}):\n"
            "  %f : bool = prim::Constant[value=0]()\n"
            "  %t : bool = prim::Constant[value=1]()\n"
            "  %mo : float = prim::Constant[value=0.1]()\n"
            "  %eps : float = prim::Constant[value=1e-05]()\n"
            "  %one : int = prim::Constant[value=1]()\n"
            f"  %y : {t} = aten::batch_norm(%x, %w, %b, %m, %v, %f, %mo, %eps, %t)\n"
            f"  %z : {t} = {tail}\n"
            "  return (%z)\n"
        )
        _, (group,) = fused_groups(ir)
        return fuser._C.group_param_bytes(group)

    # One more pointer (8 bytes) and its strides (8 bytes per dim, 3 dims) at most.
    assert 8 <= group_bytes(True) - group_bytes(False) <= 8 + 3 * 8
