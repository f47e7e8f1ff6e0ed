"""Measured time of one group, alone: its fuser::FusionGroup node wrapped in a graph of
its own and called on random inputs of the group's profiled types (the kernel, without
the guard), against the same subgraph run by the TorchScript interpreter with the fuser
off (each node its own kernel)."""

from __future__ import annotations

from typing import Any

import torch

import fuser
from fuser.bench.timing import TimingBudget, time_calls, warm_up
from fuser.report import inputs as report_inputs

BUDGET = TimingBudget(seconds=0.2, min_reps=5, max_reps=200)


def _function_around(group: Any) -> Any:
    """A callable graph whose only node is a copy of `group`."""
    subgraph = group.g("Subgraph")
    outer = torch._C.Graph()
    args = []
    for sub_input in subgraph.inputs():
        value = outer.addInput()
        value.setType(sub_input.type())
        args.append(value)
    outputs = list(subgraph.outputs())
    node = outer.create(group.kind(), args, len(outputs))
    node.g_("Subgraph", subgraph)
    outer.insertNode(node)
    tup = outer.create("prim::TupleConstruct", list(node.outputs()), 1)
    tup.output().setType(torch._C.TupleType([v.type() for v in outputs]))
    outer.insertNode(tup)
    outer.registerOutput(tup.output())
    return torch._C._create_function_from_graph("report_group", outer)


def time_group(group: Any) -> tuple[float, float] | None:
    """(fused, unfused) median microseconds per call, or None when some input's type is
    incomplete or the group cannot run alone."""
    subgraph = group.g("Subgraph")
    args = [report_inputs.for_value(v) for v in subgraph.inputs()]
    if any(a is None for a in args):
        return None
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    device = tensors[0].device if tensors else torch.device("cpu")
    fused = _function_around(group)
    unfused = torch._C._create_function_from_graph("report_unfused", subgraph.copy())
    arg_sets = [tuple(args)]
    try:
        warm_up(fused, arg_sets, calls=2)
        fused_time = time_calls(fused, arg_sets, device, BUDGET)
        with fuser.enabled(False):
            warm_up(unfused, arg_sets, calls=3)
            unfused_time = time_calls(unfused, arg_sets, device, BUDGET)
    except RuntimeError:
        return None
    return fused_time.median_us, unfused_time.median_us
