"""The terminal output: the results table with its notes, and --smoke's pass/fail list.

A cell with no time says why in one word ("n/a", "wrong"); the reasons follow the table
once each, so the table stays narrow enough to read. Model rows get a table of their
own, one line per mode: time, host time, groups and ATen elementwise kernels per call.
"""

from __future__ import annotations

from fuser.bench.models import EVERY_MODEL_WORKLOAD
from fuser.bench.modes import EAGER, FUSER
from fuser.bench.results import ModeResult, Row, SuiteResult

NA = "n/a"
WRONG = "wrong"


def format_us(value: float) -> str:
    return f"{value:.1f}" if value < 1000 else f"{value:.0f}"


def format_ratio(value: float) -> str:
    return f"{value:.2f}x"


def _mode_cell(result: ModeResult | None, text: str | None) -> str:
    if result is None:
        return ""
    if result.is_wrong:
        return WRONG
    return NA if text is None else text


def _optional(value: float | int | None, fmt: str) -> str:
    return NA if value is None else format(value, fmt)


def columns(mode_names: list[str]) -> list[str]:
    """Header of the table: eager's time, then each other mode's time and speedup."""
    head = ["workload", "size", "shape", "dtype", "device", "groups", "kernels"]
    per_mode: list[str] = []
    for mode in mode_names:
        per_mode.append(f"{mode} us")
        if mode != EAGER:
            per_mode.append(f"{mode} x")
    return [*head, *per_mode, "fuser GB/s", "% copy", "status"]


def row_cells(row: Row, mode_names: list[str]) -> list[str]:
    cells = [
        row.workload,
        row.size,
        row.shape,
        row.dtype,
        row.device,
        _optional(row.groups, "d"),
        _optional(row.kernels, "d"),
    ]
    for mode in mode_names:
        result = row.modes.get(mode)
        time_us = row.time_us(mode)
        cells.append(_mode_cell(result, None if time_us is None else format_us(time_us)))
        if mode != EAGER:
            speedup = row.speedup(mode)
            cells.append(_mode_cell(result, None if speedup is None else format_ratio(speedup)))
    cells.append(_optional(row.gbps(FUSER), ".1f"))
    cells.append(_optional(row.percent_of_copy(FUSER), ".0f"))
    status = "FAILED" if row.failed else "ok"
    if row.interpreted_runs:
        status += f" ({row.interpreted_runs} interpreted)"
    cells.append(status)
    return cells


def _is_numeric(cell: str) -> bool:
    return cell.rstrip("x").replace(".", "", 1).isdigit()


def render_grid(header: list[str], body: list[list[str]]) -> str:
    """Columns padded to their widest cell; numbers right-aligned, text left-aligned."""
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        padded = [
            cell.rjust(width) if _is_numeric(cell) else cell.ljust(width)
            for cell, width in zip(cells, widths, strict=True)
        ]
        return "  ".join(padded).rstrip()

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([line(header), rule, *(line(cells) for cells in body)])


def notes(result: SuiteResult) -> list[str]:
    """Why cells are n/a or wrong, and why rows FAILED: each reason once."""
    lines: list[str] = []
    seen: set[tuple[str, str, str]] = set()
    for row in result.rows:
        for mode, mode_result in row.modes.items():
            if mode_result.na_reason and (mode, row.device, mode_result.na_reason) not in seen:
                seen.add((mode, row.device, mode_result.na_reason))
                lines.append(f"n/a: {mode} on {row.device}: {mode_result.na_reason}")
            if mode_result.mismatch and mode != FUSER:
                first = mode_result.mismatch.splitlines()[0]
                lines.append(f"wrong: {mode} on {_row_label(row)}: {first}")
            if mode_result.eager_difference:
                lines.append(
                    f"judged against TorchScript's result: {mode} on {_row_label(row)}, which "
                    f"differs from eager as TorchScript's own does: {mode_result.eager_difference}"
                )
    for row in result.failed_rows:
        lines.append(f"FAILED: {_row_label(row)}: {row.failure}")
    return lines


def _row_label(row: Row) -> str:
    return f"{row.workload} {row.size} {row.dtype} {row.device}"


def is_model_row(row: Row) -> bool:
    return row.workload in EVERY_MODEL_WORKLOAD


MODEL_COLUMNS = [
    "model", "shape", "dtype", "device", "mode", "us", "x", "host us", "groups",
    "elementwise", "% of eager", "status",
]  # fmt: skip


def _mode_groups(result: ModeResult) -> str:
    return "-" if result.groups is None else str(result.groups)


def model_row_lines(row: Row) -> list[list[str]]:
    """One line per mode of a model row."""
    eager = row.modes.get(EAGER)
    eager_count = None if eager is None else eager.elementwise_kernels
    lines = []
    for mode, result in row.modes.items():
        speedup = row.speedup(mode) if mode != EAGER else None
        count = result.elementwise_kernels
        share = None
        if count is not None and eager_count:
            share = 100.0 * count / eager_count
        time_us = result.time_us
        lines.append(
            [
                row.workload,
                row.shape,
                row.dtype,
                row.device,
                mode,
                _mode_cell(result, None if time_us is None else format_us(time_us)),
                ""
                if mode == EAGER
                else _mode_cell(result, None if speedup is None else format_ratio(speedup)),
                _mode_cell(result, None if result.host_us is None else format_us(result.host_us)),
                _mode_groups(result),
                _mode_cell(result, None if count is None else f"{count:g}"),
                _optional(share, ".0f"),
                ("FAILED" if row.failed else "ok") if mode == FUSER else "",
            ]
        )
    return lines


def render_model_table(rows: list[Row]) -> list[str]:
    body = [line for row in rows for line in model_row_lines(row)]
    legend = [
        "models: scripted and frozen (eager and compile: the module itself), under no_grad; "
        "_train rows: scripted unfrozen, forward then every gradient",
        "us: median per call (CUDA events on GPU); x: eager / mode; host us: host time per"
        " call, the device synchronized before each call outside the clock (CPU: = us)",
        "groups: the mode's own fusion groups in its optimized graph (- where it has none)",
        "elementwise: ATen elementwise kernels launched per call outside fusion groups"
        " (profiler; fuser/bench/elementwise_count.py); % of eager: of eager's count",
    ]
    return [render_grid(MODEL_COLUMNS, body), "", *legend]


def render_table(result: SuiteResult) -> str:
    kernel_rows = [row for row in result.rows if not is_model_row(row)]
    model_rows = [row for row in result.rows if is_model_row(row)]
    parts: list[str] = []
    if kernel_rows:
        header = columns(result.mode_names)
        body = [row_cells(row, result.mode_names) for row in kernel_rows]
        bandwidth = ", ".join(
            f"{dev} {gbps:.1f} GB/s" for dev, gbps in result.copy_bandwidth_gbps.items()
        )
        parts += [
            render_grid(header, body),
            "",
            "groups: fuser::FusionGroup nodes in the fuser's optimized graph; kernels: kernels"
            " the fuser built for the row (0 when earlier rows built them all)",
            "us: median microseconds per call; x: eager time / mode time (above 1 is faster)",
            "fuser GB/s: (input bytes + output bytes) / fuser time;"
            f" % copy: of the measured copy bandwidth ({bandwidth or NA})",
        ]
    if model_rows:
        parts += ([""] if parts else []) + render_model_table(model_rows)
    return "\n".join([*parts, *notes(result)])


def _check_state(result: ModeResult) -> str:
    if result.is_wrong:
        return WRONG
    return NA if result.na_reason else "ok"


def render_smoke_list(result: SuiteResult) -> str:
    """One PASS/FAILED line per row with each mode's check; reasons indented below."""
    lines = []
    for row in result.rows:
        checks = ", ".join(f"{m} {_check_state(r)}" for m, r in row.modes.items())
        verdict = "FAILED" if row.failed else "PASS"
        lines.append(
            f"{verdict:6} {_row_label(row)}  groups={_optional(row.groups, 'd')}"
            f" kernels={_optional(row.kernels, 'd')}"
            f" interpreted={_optional(row.interpreted_runs, 'd')}  [{checks}]"
        )
        if row.failure:
            lines.extend("         " + text for text in row.failure.splitlines())
    passed = len(result.rows) - len(result.failed_rows)
    lines.append(f"smoke check: {passed} of {len(result.rows)} rows passed")
    extra = [line for line in notes(result) if not line.startswith("FAILED")]
    return "\n".join([*lines, *extra])
