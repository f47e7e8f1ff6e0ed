"""Support preview: every operator kind of a graph with its input dtypes, how many
nodes, how many of them fused, and why the others did not."""

from __future__ import annotations

from typing import Any

from fuser.report import graph_walk as gw
from fuser.report.model import OpRow
from fuser.report.reason_classes import reason_class


def _key(node: Any) -> tuple[str, tuple[str, ...]]:
    dtypes = tuple(gw.dtype_name(v) for v in node.inputs() if gw.is_tensor(v))
    return node.kind(), dtypes


def support_preview(graph: Any) -> list[OpRow]:
    rows: dict[tuple[str, tuple[str, ...]], OpRow] = {}

    def row(node: Any) -> OpRow:
        kind, dtypes = _key(node)
        return rows.setdefault((kind, dtypes), OpRow(kind, dtypes, 0, 0))

    for node in gw.walk(graph.block()):
        if node.kind() == gw.FUSION_GROUP:
            for inner in gw.subgraph_ops(node):
                r = row(inner)
                r.count += 1
                r.fused += 1
        elif gw.is_op(node):
            r = row(node)
            r.count += 1
            cls = reason_class(gw.reason_of(node))
            r.reason_classes[cls] = r.reason_classes.get(cls, 0) + 1
    return sorted(rows.values(), key=lambda r: (-r.count, r.kind, r.input_dtypes))
