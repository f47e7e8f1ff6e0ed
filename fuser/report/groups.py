"""The groups of a graph: what each holds, the bytes it moves, and the bandwidth-bound
estimate of its time fused (inputs read once, outputs written once) against the same
nodes unfused (every node reads its inputs and writes its outputs)."""

from __future__ import annotations

from typing import Any

from fuser.report import graph_walk as gw
from fuser.report.model import GroupRow


def _moves_data(value: Any) -> bool:
    return gw.is_tensor(value) or value.node().kind() == "prim::ListConstruct"


def _total(values: list[Any]) -> int | None:
    """Bytes of the tensors (and tensor lists) among `values`; None if any is unknown."""
    weights = [gw.value_bytes(v) for v in values if _moves_data(v)]
    return None if any(w is None for w in weights) else sum(w for w in weights if w is not None)


def _unfused_bytes(ops: list[Any]) -> int | None:
    total = 0
    for node in ops:
        if not gw.launches_kernel(node):
            continue
        read, written = _total(list(node.inputs())), _total(list(node.outputs()))
        if read is None or written is None:
            return None
        total += read + written
    return total


def group_row(index: int, group: Any) -> GroupRow:
    subgraph = group.g("Subgraph")
    ins, outs = list(subgraph.inputs()), list(subgraph.outputs())
    ops = gw.subgraph_ops(group)
    devices = [d for d in (gw.device_of(v) for v in ins + outs) if d]
    return GroupRow(
        index=index,
        device=devices[0] if devices else None,
        ops=[n.kind() for n in ops],
        inputs=[gw.size_label(v) for v in ins],
        outputs=[gw.size_label(v) for v in outs],
        bytes_read=_total(ins),
        bytes_written=_total(outs),
        unfused_bytes=_unfused_bytes(ops),
        unfused_kernels=sum(1 for n in ops if gw.launches_kernel(n)),
    )


def fusion_groups(graph: Any) -> list[Any]:
    return [n for n in gw.walk(graph.block()) if n.kind() == gw.FUSION_GROUP]


def group_rows(graph: Any) -> list[GroupRow]:
    return [group_row(i, g) for i, g in enumerate(fusion_groups(graph))]


def microseconds(nbytes: int | None, gbps: float | None) -> float | None:
    """Time to move `nbytes` at `gbps` (1e9 bytes per second)."""
    if nbytes is None or not gbps:
        return None
    return nbytes / (gbps * 1e3)


def add_estimates(rows: list[GroupRow], bandwidth_gbps: dict[str, float]) -> None:
    for row in rows:
        gbps = bandwidth_gbps.get((row.device or "").split(":")[0])
        moved = (
            None
            if row.bytes_read is None or row.bytes_written is None
            else row.bytes_read + row.bytes_written
        )
        row.est_fused_us = microseconds(moved, gbps)
        row.est_unfused_us = microseconds(row.unfused_bytes, gbps)
