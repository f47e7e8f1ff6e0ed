"""The JSON file: every measured and derived number, with the machine's metadata.

Derived numbers (speedup, GB/s, % of copy) are written for readers of the file and
ignored when it is read back, since they follow from the measured ones.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from fuser.bench.results import ModeResult, Row, SuiteResult

FORMAT_VERSION = 1
_DERIVED_MODE_KEYS = ("speedup_vs_eager", "gbps", "percent_of_copy")
_DERIVED_ROW_KEYS = ("kernels", "status")


def _row_to_dict(row: Row) -> dict[str, Any]:
    data = dataclasses.asdict(row)
    data["kernels"] = row.kernels
    data["status"] = "FAILED" if row.failed else "ok"
    for name, mode in data["modes"].items():
        mode["speedup_vs_eager"] = row.speedup(name)
        mode["gbps"] = row.gbps(name)
        mode["percent_of_copy"] = row.percent_of_copy(name)
    return data


def to_json_dict(result: SuiteResult) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "metadata": result.metadata,
        "options": result.options,
        "mode_names": result.mode_names,
        "copy_bandwidth_gbps": result.copy_bandwidth_gbps,
        "rows": [_row_to_dict(row) for row in result.rows],
    }


def _row_from_dict(data: dict[str, Any]) -> Row:
    fields = {k: v for k, v in data.items() if k not in _DERIVED_ROW_KEYS and k != "modes"}
    modes = {
        name: ModeResult(**{k: v for k, v in mode.items() if k not in _DERIVED_MODE_KEYS})
        for name, mode in data["modes"].items()
    }
    return Row(**fields, modes=modes)


def from_json_dict(data: dict[str, Any]) -> SuiteResult:
    return SuiteResult(
        metadata=data["metadata"],
        options=data["options"],
        mode_names=list(data["mode_names"]),
        copy_bandwidth_gbps=dict(data["copy_bandwidth_gbps"]),
        rows=[_row_from_dict(row) for row in data["rows"]],
    )


def write_json(result: SuiteResult, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_json_dict(result), indent=2) + "\n")


def read_json(path: Path) -> SuiteResult:
    return from_json_dict(json.loads(path.read_text()))
