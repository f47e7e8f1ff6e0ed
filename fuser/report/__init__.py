"""fuser.report: what fused, what did not, why, and what it is worth.

    report = fuser.report(fn_or_module, *example_inputs)
    print(report)              # text tables; report.to_dict() for JSON

or `python -m fuser.report MODEL.pt --input 'float32[32,3,224,224]'` (see cli.py).
The model runs twice with the fuser on (call 1 profiles, call 2 optimizes) while the
pass leaves typed copies of the graphs it fused; each section reads those copies:
preview.py (support preview), groups.py (groups, bytes, estimates), refusals.py (why
not fused), totals.py; text.py and dot.py print them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fuser.report.model import GraphReport, Report, Settings

__all__ = ["report", "Report", "GraphReport", "Settings"]


def report(
    fn_or_module: Any,
    *example_inputs: Any,
    min_group_size: int | None = None,
    max_groups: int | None = None,
    arg_limit: int | None = None,
    devices: Sequence[str] | None = None,
    bandwidth_gbps: dict[str, float] | None = None,
    measure: bool = True,
) -> Report:
    """Support preview, groups, why-not-fused and totals for `fn_or_module` on
    `example_inputs`. The settings (None: the current ones) apply to this run only;
    `devices` must match FUSER_DEVICES. `bandwidth_gbps` ({"cpu": 20.0}) replaces the
    measured copy bandwidth; `measure=False` times nothing (no bandwidth, no kernels).
    The function must not have been optimized for these inputs before in this process."""
    from fuser.report.build import make_report

    return make_report(
        fn_or_module,
        example_inputs,
        min_group_size=min_group_size,
        max_groups=max_groups,
        arg_limit=arg_limit,
        devices=devices,
        bandwidth_gbps=bandwidth_gbps,
        measure=measure,
    )
