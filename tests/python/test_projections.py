"""A loop's per-step input GEMMs computed as one before it (csrc/passes/projections.cpp),
end to end through the profiling executor: which scripted loops get it, and that every
result still equals eager."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from fuser.bench.workloads import WORKLOADS
from helpers import all_nodes, devices, in_loop, run_python, script_from_source

# The benchmark's LSTM layer: a loop over x.size(0) steps, x[t] @ w_ih.t() in each.
LAYER = WORKLOADS["lstm_layer"].source

# Only the first `steps` rows of x are read: a product of all rows would waste work.
FIRST_STEPS = """
def first_steps(x, w, steps: int):
    acc = torch.zeros(x.size(1), w.size(0), device=x.device)
    for t in range(steps):
        acc = acc + x[t] @ w.t()
    return acc
"""

BATCH, INPUT, HIDDEN = 4, 6, 5


def eager(source: str, name: str) -> Any:
    namespace: dict[str, Any] = {"torch": torch, "Tensor": torch.Tensor}
    exec(source, namespace)
    return namespace[name]


def layer_args(steps: int, device: str) -> list[torch.Tensor]:
    shapes = [
        (steps, BATCH, INPUT),
        (BATCH, HIDDEN),
        (BATCH, HIDDEN),
        (4 * HIDDEN, INPUT),
        (4 * HIDDEN, HIDDEN),
        (4 * HIDDEN,),
        (4 * HIDDEN,),
    ]
    return [torch.randn(*s, device=device) for s in shapes]


def products_of(graph: torch._C.Graph, x_name: str) -> tuple[int, int]:
    """(matmuls of the whole input `x` outside any loop, matmuls inside loops that read
    a step of it)."""
    whole = per_step = 0
    for node in all_nodes(graph):
        if node.kind() != "aten::matmul":
            continue
        operand = next(node.inputs())
        if operand.debugName().startswith(x_name) and not in_loop(node):
            whole += 1
        elif operand.node().kind() == "aten::select" and in_loop(node):
            per_step += next(operand.node().inputs()).debugName().startswith(x_name)
    return whole, per_step


def optimized_graph(fn: Any, *args: Any) -> torch._C.Graph:
    for _ in range(3):
        fn(*args)
    return torch.jit.last_executed_optimized_graph()


@pytest.mark.parametrize("device", devices())
def test_layer_reads_its_steps_from_one_product(fused: None, device: str) -> None:
    scripted = script_from_source(LAYER, "lstm_layer")
    with torch.no_grad():
        graph = optimized_graph(scripted, *layer_args(20, device))
        assert products_of(graph, "x") == (1, 0), graph
        # The executor unrolls by 8: 20 steps run 2 unrolled trips and a remainder of
        # 4; 8 and 1 steps use only one of the two loops, 9 both. All read the product.
        for steps in (20, 8, 1, 9, 17):
            args = layer_args(steps, device)
            torch.testing.assert_close(scripted(*args), eager(LAYER, "lstm_layer")(*args))


def test_layer_with_zero_steps_computes_no_product(fused: None) -> None:
    # With no step, eager never multiplies: a weight of the wrong width is no error
    # there, and must be none here.
    scripted = script_from_source(LAYER.replace("torch.stack(outputs)", "hx"), "lstm_layer")
    with torch.no_grad():
        optimized_graph(scripted, *layer_args(10, "cpu"))
        args = layer_args(0, "cpu")
        args[3] = torch.randn(4 * HIDDEN, INPUT + 1)
        got = scripted(*args)
    torch.testing.assert_close(got, (args[1], args[1], args[2]))


def test_loop_over_fewer_steps_than_rows_keeps_its_steps(fused: None) -> None:
    scripted = script_from_source(FIRST_STEPS, "first_steps")
    x, w = torch.randn(50, BATCH, INPUT), torch.randn(HIDDEN, INPUT)
    with torch.no_grad():
        graph = optimized_graph(scripted, x, w, 3)
        whole, per_step = products_of(graph, "x")
        assert whole == 0 and per_step > 0, graph
        torch.testing.assert_close(scripted(x, w, 3), eager(FIRST_STEPS, "first_steps")(x, w, 3))


def test_training_layer_gradients_equal_eager(fused: None) -> None:
    scripted = script_from_source(LAYER, "lstm_layer")
    args = [a.requires_grad_() for a in layer_args(11, "cpu")]
    for _ in range(3):
        out = scripted(*args)
    got = torch.autograd.grad(sum(o.sum() for o in out), args)
    ref_out = eager(LAYER, "lstm_layer")(*args)
    want = torch.autograd.grad(sum(o.sum() for o in ref_out), args)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(got, want)


def test_flag_off_keeps_per_step_products() -> None:
    code = f"""
        import torch, fuser
        from torch import Tensor
        {LAYER.strip().replace(chr(10), chr(10) + " " * 8)}

        fuser.enable()
        f = torch.jit.script(lstm_layer)
        args = [torch.randn(12, 4, 6), torch.randn(4, 5), torch.randn(4, 5),
                torch.randn(20, 6), torch.randn(20, 5), torch.randn(20), torch.randn(20)]
        with torch.no_grad():
            for _ in range(3):
                f(*args)
        graph = torch.jit.last_executed_optimized_graph()
        print("whole", sum(1 for n in graph.findAllNodes("aten::matmul", recurse=True)
                           if next(n.inputs()).debugName().startswith("x")))
        print("fused", len(graph.findAllNodes("fuser::FusionGroup", recurse=True)) > 0)
    """
    for flag, whole in (("0", 0), ("1", 1)):
        result = run_python(code, {"FUSER_HOIST": flag})
        assert result.returncode == 0, result.stderr
        assert f"whole {whole}" in result.stdout, result.stdout
        assert "fused True" in result.stdout
