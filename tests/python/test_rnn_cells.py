"""RNN cells end to end (csrc/passes/chunks.cpp, shapes.cpp and the chunk-reading
runtime): after the matrix products, each cell's gate math is one fusion group whose
kernel reads the gate chunks in place."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import fuser
from helpers import FUSION_GROUP, LSTM_CELL, all_nodes, devices, in_loop, script_from_source
from helpers import eager_from_source as eager

LSTM = LSTM_CELL

MILSTM = """
def cell(x, hx, cx, w_ih, w_hh, alpha, beta_i, beta_h, bias):
    Wx = x.mm(w_ih.t())
    Uz = hx.mm(w_hh.t())
    gates = alpha * Wx * Uz + beta_i * Wx + beta_h * Uz + bias
    i, f, g, o = gates.chunk(4, 1)
    i = torch.sigmoid(i)
    f = torch.sigmoid(f)
    g = torch.tanh(g)
    o = torch.sigmoid(o)
    cy = f * cx + i * g
    hy = o * torch.tanh(cy)
    return hy, cy
"""

GRU = """
def cell(x, hx, w_ih, w_hh, b_ih, b_hh):
    gi = torch.mm(x, w_ih.t()) + b_ih
    gh = torch.mm(hx, w_hh.t()) + b_hh
    i_r, i_i, i_n = gi.chunk(3, 1)
    h_r, h_i, h_n = gh.chunk(3, 1)
    r = torch.sigmoid(i_r + h_r)
    z = torch.sigmoid(i_i + h_i)
    n = torch.tanh(i_n + r * h_n)
    hy = n + z * (hx - n)
    return hy
"""

LSTM_LAYER = (
    LSTM
    + """
def layer(xs, hx, cx, w_ih, w_hh, b_ih, b_hh):
    for t in range(xs.size(0)):
        hx, cx = cell(xs[t], hx, cx, w_ih, w_hh, b_ih, b_hh)
    return hx, cx
"""
)

BATCH, INPUT, HIDDEN = 3, 10, 16


def randn(*shape: int, device: str, grad: bool = False) -> torch.Tensor:
    return torch.randn(*shape, device=device).requires_grad_(grad)


def cell_args(
    device: str, grad: bool, *, gates: int, states: int, vectors: int
) -> list[torch.Tensor]:
    """x, `states` state tensors, the two weights, then `vectors` vectors of gates * H."""
    shapes = [
        (BATCH, INPUT),
        *[(BATCH, HIDDEN)] * states,
        (gates * HIDDEN, INPUT),
        (gates * HIDDEN, HIDDEN),
        *[(gates * HIDDEN,)] * vectors,
    ]
    return [randn(*s, device=device, grad=grad) for s in shapes]


def lstm_args(device: str, grad: bool = False) -> list[torch.Tensor]:
    return cell_args(device, grad, gates=4, states=2, vectors=2)


def milstm_args(device: str, grad: bool = False) -> list[torch.Tensor]:
    return cell_args(device, grad, gates=4, states=2, vectors=4)


def gru_args(device: str, grad: bool = False) -> list[torch.Tensor]:
    return cell_args(device, grad, gates=3, states=1, vectors=2)


# name -> (source, arguments, number of results)
CELLS = {
    "lstm": (LSTM, lstm_args, 2),
    "milstm": (MILSTM, milstm_args, 2),
    "gru": (GRU, gru_args, 1),
}


def fusion_groups(graph: torch._C.Graph) -> list[torch._C.Node]:
    return [n for n in all_nodes(graph) if n.kind() == FUSION_GROUP]


def kinds_outside_groups(graph: torch._C.Graph) -> list[str]:
    return [n.kind() for n in all_nodes(graph)]


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("name", sorted(CELLS))
def test_cell_is_one_group_after_the_matmuls(fused: None, name: str, device: str) -> None:
    source, make_args, num_outputs = CELLS[name]
    scripted = script_from_source(source, "cell")
    args = make_args(device)
    with torch.no_grad():
        for _ in range(3):
            scripted(*args)
        graph = torch.jit.last_executed_optimized_graph()
        (group,) = fusion_groups(graph)
        # The cell's results only: no gate, no chunk, no intermediate is written.
        assert len(list(group.outputs())) == num_outputs, graph
        outside = kinds_outside_groups(graph)
        assert outside.count("aten::mm") == 2
        assert "prim::ConstantChunk" not in outside
        assert "prim::BroadcastingChunk" not in outside
        assert "aten::add" not in outside and "aten::sigmoid" not in outside
        launches = fuser.stats()["kernel_launches"]
        got = scripted(*args)
        assert fuser.stats()["kernel_launches"] == launches + 1
    torch.testing.assert_close(got, eager(source, "cell")(*args))


@pytest.mark.parametrize("device", devices())
def test_lstm_cell_with_uneven_batch_runs_fused(fused: None, device: str) -> None:
    # The guard checks no sizes: a new batch size runs the same fused group. On CPU it
    # reuses the kernel; on CUDA a group's first shapes get kernels of their own
    # (test_cuda.py counts them).
    scripted = script_from_source(LSTM, "cell")
    with torch.no_grad():
        for _ in range(3):
            scripted(*lstm_args(device))
        stats = fuser.stats()
        args = lstm_args(device)
        args[0], args[1], args[2] = (randn(7, s, device=device) for s in (INPUT, HIDDEN, HIDDEN))
        got = scripted(*args)
    assert fuser.stats()["kernel_launches"] == stats["kernel_launches"] + 1
    assert fuser.stats()["guard_failures"] == stats["guard_failures"]
    assert fuser.stats()["interpreted_runs"] == stats["interpreted_runs"]
    if device == "cpu":
        built = ("kernels_compiled", "disk_cache_hits")
        assert [fuser.stats()[k] for k in built] == [stats[k] for k in built]
    torch.testing.assert_close(got, eager(LSTM, "cell")(*args))


@pytest.mark.parametrize("device", devices())
def test_lstm_layer_of_100_steps_fuses_its_step(fused: None, device: str) -> None:
    scripted = script_from_source(LSTM_LAYER, "layer")
    xs = randn(100, BATCH, INPUT, device=device)
    args = [xs, *lstm_args(device)[1:]]
    with torch.no_grad():
        for _ in range(3):
            scripted(*args)
        graph = torch.jit.last_executed_optimized_graph()
        # The executor unrolls the loop (8 steps per iteration, then a remainder loop)
        # and the input products become one before the loops (test_projections.py):
        # every copy of the step, found by the select of its row of that product, is
        # one group.
        groups = fusion_groups(graph)
        outside = kinds_outside_groups(graph)
        step_rows = [n for n in all_nodes(graph) if n.kind() == "aten::select" and in_loop(n)]
        assert len(groups) == len(step_rows) > 1, graph
        assert all(len(list(g.outputs())) == 2 for g in groups)
        assert all(g.owningBlock() != graph.block() for g in groups)  # inside the loops
        assert "prim::ConstantChunk" not in outside
        assert "aten::sigmoid" not in outside
        launches = fuser.stats()["kernel_launches"]
        got = scripted(*args)
        assert fuser.stats()["kernel_launches"] == launches + 100
    torch.testing.assert_close(got, eager(LSTM_LAYER, "layer")(*args))


def total(outputs: Any) -> torch.Tensor:
    return sum(o.sum() for o in (outputs if isinstance(outputs, tuple) else (outputs,)))


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("name", sorted(CELLS))
def test_training_cell_fuses_forward_and_backward(fused: None, name: str, device: str) -> None:
    source, make_args, _ = CELLS[name]
    scripted = script_from_source(source, "cell")
    args = make_args(device, grad=True)
    for _ in range(4):  # the forward and backward graphs have executors of their own
        total(scripted(*args)).backward()
        for a in args:
            a.grad = None

    # The autodiff forward runs in an executor of its own, which last_executed_optimized_graph
    # does not show: its kernel launches count its groups. MiLSTM's backward needs the
    # unchunked alpha * Wx * Uz operands, so the chunk stops there and a second group
    # computes the sum feeding it.
    forward_groups = 2 if name == "milstm" else 1
    launches = fuser.stats()["kernel_launches"]
    outputs = scripted(*args)
    assert fuser.stats()["kernel_launches"] == launches + forward_groups
    total(outputs).backward()
    # Kernels launched by backward() are the backward graph's groups.
    assert fuser.stats()["kernel_launches"] > launches + forward_groups
    if device == "cpu":
        # CUDA's backward runs on the autograd engine's device thread, and the last
        # executed graph is recorded per thread: only on CPU is it the backward graph.
        backward_graph = torch.jit.last_executed_optimized_graph()
        assert fusion_groups(backward_graph), backward_graph
    got = [a.grad for a in args]

    reference = [a.detach().clone().requires_grad_() for a in args]
    expected_outputs = eager(source, "cell")(*reference)
    total(expected_outputs).backward()
    torch.testing.assert_close(outputs, expected_outputs)
    torch.testing.assert_close(got, [r.grad for r in reference])
