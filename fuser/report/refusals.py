"""Why not fused: the refused nodes of a graph counted by reason (value names blanked)
and, within each reason, by operator, with one example node each."""

from __future__ import annotations

from typing import Any

from fuser.report import graph_walk as gw
from fuser.report.model import RefusalRow
from fuser.report.reason_classes import NO_REASON, generic_reason, reason_class


def describe(node: Any) -> str:
    """`%out = kind(%a, %b)`, as the pass's describeNode writes it."""
    outs = ", ".join("%" + v.debugName() for v in node.outputs())
    ins = ", ".join("%" + v.debugName() for v in node.inputs())
    return f"{outs + ' = ' if outs else ''}{node.kind()}({ins})"


def refusals(graph: Any) -> list[RefusalRow]:
    rows: dict[str, RefusalRow] = {}
    for node in gw.walk(graph.block()):
        if node.kind() == gw.FUSION_GROUP or not gw.is_op(node):
            continue
        reason = gw.reason_of(node)
        key = generic_reason(reason) if reason is not None else NO_REASON
        row = rows.get(key)
        if row is None:
            example = describe(node) + (f": {reason}" if reason else "")
            row = rows[key] = RefusalRow(key, reason_class(reason), 0, {}, example)
        row.count += 1
        row.by_op[node.kind()] = row.by_op.get(node.kind(), 0) + 1
    return sorted(rows.values(), key=lambda r: (-r.count, r.reason))


def refusals_by_op(rows: list[RefusalRow]) -> dict[str, dict[str, int]]:
    """op kind -> reason class -> count, over all reasons."""
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        for kind, n in row.by_op.items():
            classes = out.setdefault(kind, {})
            classes[row.reason_class] = classes.get(row.reason_class, 0) + n
    return dict(sorted(out.items(), key=lambda item: (-sum(item[1].values()), item[0])))
