"""The report as text tables (the default output)."""

from __future__ import annotations

from fuser.bench.table import render_grid
from fuser.report.model import GraphReport, Report
from fuser.report.refusals import refusals_by_op

MAX_LISTED = 8  # operators listed per group before "+N more"


def _bytes(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} x{n}" for name, n in counts.items())


def _ops(ops: list[str]) -> str:
    names = [op.split("::")[-1] for op in ops]
    more = len(names) - MAX_LISTED
    return ", ".join(names[:MAX_LISTED]) + (f", +{more} more" if more > 0 else "")


def render_settings(report: Report) -> str:
    s = report.settings
    lines = [
        "settings: "
        f"min group size {s.min_group_size}, "
        f"max groups {s.max_groups or 'unlimited'}, "
        f"argument limit {s.arg_limit}, "
        f"devices {','.join(s.devices)}",
    ]
    if report.bandwidth_gbps:
        bw = ", ".join(f"{d} {g:.1f} GB/s" for d, g in report.bandwidth_gbps.items())
        lines.append(f"bandwidth (copy, read + write): {bw}")
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines)


def render_preview(graph: GraphReport) -> str:
    body = [
        [
            row.kind,
            ",".join(row.input_dtypes) or "-",
            str(row.count),
            str(row.fused),
            "yes" if row.fusible else ("partly" if row.fused else "no"),
            _counts(row.reason_classes),
        ]
        for row in graph.preview
    ]
    header = ["op", "input dtypes", "nodes", "fused", "fusible", "why not (class)"]
    return render_grid(header, body) if body else "(no operators)"


def render_groups(graph: GraphReport) -> str:
    if not graph.groups:
        return "(no groups)"
    body = []
    for g in graph.groups:
        speedup = g.est_speedup
        body.append(
            [
                f"#{g.index}",
                g.device or "?",
                str(len(g.ops)),
                _ops(g.ops),
                f"{len(g.inputs)}/{len(g.outputs)}",
                _bytes(g.bytes_read),
                _bytes(g.bytes_written),
                _bytes(g.unfused_bytes),
                _us(g.est_fused_us),
                _us(g.est_unfused_us),
                "-" if speedup is None else f"{speedup:.2f}x",
                _us(g.measured_us),
                _us(g.measured_unfused_us),
            ]
        )
    header = [
        "group",
        "device",
        "ops",
        "inside",
        "in/out",
        "read",
        "written",
        "unfused moves",
        "est us",
        "est unfused us",
        "est speedup",
        "measured us",
        "measured unfused us",
    ]
    return render_grid(header, body)


def render_refusals(graph: GraphReport) -> str:
    if not graph.refusals:
        return "(every operator is in a group)"
    body = [[str(r.count), r.reason_class, r.reason, _counts(r.by_op)] for r in graph.refusals]
    parts = [render_grid(["nodes", "class", "reason", "by op"], body), "examples:"]
    parts += [f"  {r.example}" for r in graph.refusals]
    by_op = refusals_by_op(graph.refusals)
    parts.append("by op:")
    parts += [f"  {kind}: {_counts(classes)}" for kind, classes in by_op.items()]
    return "\n".join(parts)


def render_totals(graph: GraphReport) -> str:
    t = graph.totals
    lines = [
        f"operators in groups {t.ops_in_groups}, outside {t.ops_outside}, groups {t.groups}",
        f"kernels per call: {t.kernels_unfused} without the fuser, {t.kernels_fused} with it "
        "(counted in the graph: a loop body once, view ops none)",
    ]
    if t.measured_fuser_launches is not None:
        lines.append(f"fuser kernels launched by one call (measured): {t.measured_fuser_launches}")
    return "\n".join(lines)


def render_text(report: Report) -> str:
    parts = [render_settings(report)]
    for i, graph in enumerate(report.graphs):
        title = f"{graph.phase} graph" + (f" {i}" if len(report.graphs) > 2 else "")
        parts += [
            f"\n=== {title} ===",
            "-- support preview --",
            render_preview(graph),
            "-- groups --",
            render_groups(graph),
            "-- why not fused --",
            render_refusals(graph),
            "-- totals --",
            render_totals(graph),
        ]
    return "\n".join(parts)
