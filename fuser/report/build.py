"""Making a report: run the model under capture, then read each captured graph."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from fuser.report import capture, group_timing, groups, preview, refusals, settings, totals
from fuser.report.model import GraphReport, Report

BANDWIDTH_BUDGET_SECONDS = 0.5


def measure_bandwidth(devices: set[str]) -> dict[str, float]:
    """Copy bandwidth (GB/s) of each device type, measured as the benchmark does."""
    from fuser.bench.bandwidth import copy_bandwidth_gbps
    from fuser.bench.machine import last_level_cache_bytes
    from fuser.bench.timing import TimingBudget

    budget = TimingBudget(seconds=BANDWIDTH_BUDGET_SECONDS, min_reps=3, max_reps=50)
    out = {}
    for name in sorted(devices):
        device = torch.device(name)
        out[name] = copy_bandwidth_gbps(device, last_level_cache_bytes(device), budget)
    return out


def graph_report(phase: str, graph: Any, launches: int | None, measure_groups: bool) -> GraphReport:
    rows = groups.group_rows(graph)
    if measure_groups:
        for row, group in zip(rows, groups.fusion_groups(graph), strict=True):
            times = group_timing.time_group(group)
            if times is not None:
                row.measured_us, row.measured_unfused_us = times
    return GraphReport(
        phase=phase,
        preview=preview.support_preview(graph),
        groups=rows,
        refusals=refusals.refusals(graph),
        totals=totals.totals(graph, launches),
        graph=graph,
    )


def make_report(
    fn_or_module: Any,
    example_inputs: Sequence[Any],
    *,
    min_group_size: int | None = None,
    max_groups: int | None = None,
    arg_limit: int | None = None,
    devices: Sequence[str] | None = None,
    bandwidth_gbps: dict[str, float] | None = None,
    measure: bool = True,
) -> Report:
    settings.check_devices(devices)
    fn = capture.as_scripted(fn_or_module)
    with settings.applied(min_group_size, max_groups, arg_limit) as used:
        captured = capture.run_captured(fn, example_inputs)
        graph_reports = []
        for phase, graphs in captured.graphs.items():
            for i, graph in enumerate(graphs):
                # Only the first graph of a phase is what one call ran; later ones are
                # re-optimized fallbacks.
                launches = captured.fuser_launches.get(phase) if i == 0 else None
                graph_reports.append(graph_report(phase, graph, launches, measure))
    notes = []
    if not graph_reports:
        raise RuntimeError(
            "fuser.report: the pass optimized no graph during the report's calls; the "
            "function was probably optimized for these inputs before in this process. "
            "Pass a freshly scripted function or module."
        )
    used_devices = {
        (row.device or "").split(":")[0]
        for report in graph_reports
        for row in report.groups
        if row.device
    }
    if bandwidth_gbps is None:
        bandwidth_gbps = measure_bandwidth(used_devices) if measure else {}
    else:
        notes.append("bandwidth given by the caller, not measured")
    for report in graph_reports:
        groups.add_estimates(report.groups, bandwidth_gbps)
    return Report(settings=used, bandwidth_gbps=bandwidth_gbps, graphs=graph_reports, notes=notes)
