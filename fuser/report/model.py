"""The report's content as plain data: what the text, JSON and drawing printers read."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Settings:
    min_group_size: int
    max_groups: int  # 0: no limit
    arg_limit: int
    devices: tuple[str, ...]  # devices whose tensors may be fused


@dataclass
class OpRow:
    """One operator kind with one combination of input dtypes."""

    kind: str
    input_dtypes: tuple[str, ...]
    count: int
    fused: int  # of `count`, how many sit in groups
    reason_classes: dict[str, int] = field(default_factory=dict)  # of the others

    @property
    def fusible(self) -> bool:
        return self.fused == self.count


@dataclass
class GroupRow:
    index: int
    device: str | None
    ops: list[str]  # kinds of the nodes inside, program order
    inputs: list[str]  # size labels
    outputs: list[str]
    bytes_read: int | None
    bytes_written: int | None
    unfused_bytes: int | None  # every node's inputs read and outputs written
    unfused_kernels: int
    est_fused_us: float | None = None
    est_unfused_us: float | None = None
    measured_us: float | None = None  # the group's kernel, timed alone
    measured_unfused_us: float | None = None  # the same nodes run by the interpreter

    @property
    def est_speedup(self) -> float | None:
        if not self.bytes_read and not self.bytes_written:
            return None
        if self.unfused_bytes is None or self.bytes_read is None or self.bytes_written is None:
            return None
        return self.unfused_bytes / (self.bytes_read + self.bytes_written)


@dataclass
class RefusalRow:
    """Nodes refused for the same reason (value names blanked)."""

    reason: str
    reason_class: str
    count: int
    by_op: dict[str, int]
    example: str  # one node, as the pass describes it


@dataclass
class Totals:
    ops_in_groups: int
    ops_outside: int
    groups: int
    kernels_unfused: int  # kernel-launching ops, each its own kernel
    kernels_fused: int  # groups + kernel-launching ops outside groups
    measured_fuser_launches: int | None = None  # fuser kernels launched by one call


@dataclass
class GraphReport:
    """One graph the pass optimized: `phase` is forward or backward."""

    phase: str
    preview: list[OpRow]
    groups: list[GroupRow]
    refusals: list[RefusalRow]
    totals: Totals
    graph: Any = field(default=None, repr=False)  # the captured torch._C.Graph


@dataclass
class Report:
    settings: Settings
    bandwidth_gbps: dict[str, float]  # device -> copy bandwidth used for the estimates
    graphs: list[GraphReport]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready content (the graphs themselves left out)."""
        bare = [dataclasses.replace(g, graph=None) for g in self.graphs]
        out = dataclasses.asdict(dataclasses.replace(self, graphs=bare))
        for graph_out, graph in zip(out["graphs"], self.graphs, strict=True):
            graph_out.pop("graph", None)
            for group_out, group in zip(graph_out["groups"], graph.groups, strict=True):
                group_out["est_speedup"] = group.est_speedup
            for op_out, op in zip(graph_out["preview"], graph.preview, strict=True):
                op_out["fusible"] = op.fusible
        return out

    def __str__(self) -> str:
        from fuser.report.text import render_text

        return render_text(self)
