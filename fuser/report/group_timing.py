"""Measured time of one group, alone: its fuser::FusionGroup node wrapped in a graph of
its own and called on random inputs of the group's profiled types (the kernel, without
the guard), against the same subgraph with every node its own ATen kernel.

Both run with the graph executor's optimizations off (torch.jit.optimized_execution):
optimized, the executor inlines the wrapped group back into plain ops, and NNC would
fuse the "unfused" subgraph on CUDA. Each timing is checked by the fuser's launch
counter: the fused calls must each launch the group's kernel, the unfused ones none;
a timing that ran something else is not reported.

On CUDA the figures are the kernels' own device time (torch.profiler), not CUDA events
around each call: a group of a few microseconds runs faster than the interpreter can
launch it, and events would time the launch gap."""

from __future__ import annotations

from typing import Any

import torch

import fuser
from fuser.bench.timing import TimingBudget, sample_calls, summarize, warm_up
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
    _return_tuple(outer, list(node.outputs()))
    return torch._C._create_function_from_graph("report_group", outer)


def _return_tuple(graph: Any, values: list[Any]) -> None:
    tup = graph.create("prim::TupleConstruct", values, 1)
    tup.output().setType(torch._C.TupleType([v.type() for v in values]))
    graph.insertNode(tup)
    graph.registerOutput(tup.output())


def _unfused_graph(group: Any) -> Any:
    """The group's subgraph as ATen runs it node by node: a prim::BroadcastingChunk
    (which exists only inside groups) becomes aten::broadcast_tensors and one
    prim::ConstantChunk per input."""
    graph = group.g("Subgraph").copy()
    for chunk in list(graph.findAllNodes("prim::BroadcastingChunk")):
        chunks, dim = chunk.i("chunks"), chunk.i("dim")
        with graph.insert_point_guard(chunk):
            tensors = list(chunk.inputs())
            listed = graph.insertNode(graph.create("prim::ListConstruct", tensors, 1))
            listed.output().setType(torch._C.ListType(torch._C.TensorType.get()))
            broadcast = graph.insertNode(
                graph.create("aten::broadcast_tensors", [listed.output()], 1)
            )
            broadcast.output().setType(torch._C.ListType(torch._C.TensorType.get()))
            unpacked = graph.insertNode(
                graph.create("prim::ListUnpack", [broadcast.output()], len(tensors))
            )
            outputs = list(chunk.outputs())
            for index, tensor in enumerate(unpacked.outputs()):
                piece = graph.create("prim::ConstantChunk", [tensor], chunks)
                piece.i_("chunks", chunks).i_("dim", dim)
                graph.insertNode(piece)
                for k, out in enumerate(piece.outputs()):
                    out.setType(outputs[index * chunks + k].type())
                    outputs[index * chunks + k].replaceAllUsesWith(out)
        chunk.destroy()
    # Return a tuple, as the fused wrapper does.
    outputs = list(graph.outputs())
    _return_tuple(graph, outputs)
    for _ in outputs:
        graph.eraseOutput(0)
    return graph


def _launches() -> int:
    return int(fuser.stats()["kernel_launches"])


PROFILED_CALLS = 20


def _kernel_us_per_call(fn: Any, arg_sets: list[tuple[Any, ...]], device: torch.device) -> float:
    """Device time of the kernels `fn` launches, per call (sum over its kernels)."""
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for i in range(PROFILED_CALLS):
            fn(*arg_sets[i % len(arg_sets)])
        torch.cuda.synchronize(device)
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return sum(e.time_range.elapsed_us() for e in kernels) / PROFILED_CALLS


def _timed(fn: Any, arg_sets: list[tuple[Any, ...]], device: torch.device) -> tuple[float, int]:
    """(microseconds per call, calls made) of `fn`, already warmed up: the median host
    time on CPU, the kernels' device time on CUDA."""
    if device.type == "cuda":
        return _kernel_us_per_call(fn, arg_sets, device), PROFILED_CALLS
    samples = sample_calls(fn, arg_sets, device, BUDGET)
    return summarize(samples).median_us, len(samples)


def time_group(group: Any) -> tuple[float, float] | None:
    """(fused, unfused) microseconds per call (see _timed), or None when some input's type is
    incomplete, the group cannot run alone, or a timing ran something else."""
    subgraph = group.g("Subgraph")
    args = [report_inputs.for_value(v) for v in subgraph.inputs()]
    if any(a is None for a in args):
        return None
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    device = tensors[0].device if tensors else torch.device("cpu")
    arg_sets = [tuple(args)]
    try:
        fused = _function_around(group)
        unfused = torch._C._create_function_from_graph("report_unfused", _unfused_graph(group))
        with torch.jit.optimized_execution(False):
            warm_up(fused, arg_sets, calls=2)
            before = _launches()
            fused_us, fused_calls = _timed(fused, arg_sets, device)
            fused_launches = _launches() - before
            with fuser.enabled(False):
                warm_up(unfused, arg_sets, calls=2)
                before = _launches()
                unfused_us, _ = _timed(unfused, arg_sets, device)
                unfused_launches = _launches() - before
    except RuntimeError:
        return None
    if fused_launches < fused_calls or unfused_launches != 0:
        return None
    return fused_us, unfused_us
