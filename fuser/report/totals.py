"""Totals of a graph: operators in groups and outside, and kernels per call with and
without the fuser, counted statically (a loop body counts once, each branch of an If
counts), each unfused kernel-launching operator being one kernel."""

from __future__ import annotations

from typing import Any

from fuser.report import graph_walk as gw
from fuser.report.model import Totals


def totals(graph: Any, measured_fuser_launches: int | None = None) -> Totals:
    inside = outside = groups = kernels_inside = kernels_outside = 0
    for node in gw.walk(graph.block()):
        if node.kind() == gw.FUSION_GROUP:
            groups += 1
            ops = gw.subgraph_ops(node)
            inside += len(ops)
            kernels_inside += sum(1 for n in ops if gw.launches_kernel(n))
        elif gw.is_op(node):
            outside += 1
            kernels_outside += 1 if gw.launches_kernel(node) else 0
    return Totals(
        ops_in_groups=inside,
        ops_outside=outside,
        groups=groups,
        kernels_unfused=kernels_inside + kernels_outside,
        kernels_fused=groups + kernels_outside,
        measured_fuser_launches=measured_fuser_launches,
    )
