"""What a run measured, and the numbers derived from it (speedups, GB/s, % of copy).

The terminal table, the JSON file and the chart all read these; none of them computes a
number of its own, so the three always agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fuser.bench.modes import EAGER, FUSER


@dataclass
class ModeResult:
    mode: str
    time_us: float | None = None  # median per call
    min_us: float | None = None
    reps: int = 0
    groups: int | None = None  # fusion groups of this mode's own kind in its graph
    na_reason: str | None = None  # why there is no time: unavailable, raised, not timed
    mismatch: str | None = None  # how its result differed from eager's
    # A frozen model's result that differs from eager's as TorchScript's own does, judged
    # against TorchScript's result instead (runner.judge_against_torchscript): how far
    # it is from eager's.
    eager_difference: str | None = None
    # Model rows only (fuser/bench/models.py): median host time per call (on CPU the
    # time itself), and ATen elementwise kernels launched per call outside fusion
    # groups (fuser/bench/elementwise_count.py).
    host_us: float | None = None
    elementwise_kernels: float | None = None

    @property
    def is_wrong(self) -> bool:
        return self.mismatch is not None


@dataclass
class Row:
    workload: str
    size: str
    shape: str
    dtype: str
    device: str
    bytes_per_call: int  # bytes of inputs read plus outputs written, once each
    copy_gbps: float | None = None  # the device's copy bandwidth, for "% of copy"
    groups: int | None = None  # fuser::FusionGroup nodes in the fuser's optimized graph
    kernels_compiled: int | None = None  # fuser.stats() deltas over this row's fuser run
    kernels_from_disk: int | None = None
    # Group calls the fuser ran through the TorchScript interpreter over its warm-up
    # (fuser.stats() delta): a row whose groups fall back to the interpreter times ATen's
    # kernels, not ours.
    interpreted_runs: int | None = None
    failure: str | None = None  # why the fuser's row FAILED, if it did
    modes: dict[str, ModeResult] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.failure is not None

    @property
    def kernels(self) -> int | None:
        """Kernels the fuser built for this row: compiled now or loaded from disk."""
        if self.kernels_compiled is None:
            return None
        return self.kernels_compiled + (self.kernels_from_disk or 0)

    def time_us(self, mode: str) -> float | None:
        result = self.modes.get(mode)
        return None if result is None else result.time_us

    def speedup(self, mode: str) -> float | None:
        """Eager time / this mode's time: above 1 means faster than eager."""
        eager, this = self.time_us(EAGER), self.time_us(mode)
        if eager is None or this is None or this <= 0:
            return None
        return eager / this

    def gbps(self, mode: str = FUSER) -> float | None:
        """Effective bandwidth: bytes_per_call / time, in 1e9 bytes per second."""
        this = self.time_us(mode)
        if this is None or this <= 0:
            return None
        return self.bytes_per_call / (this * 1e3)

    def percent_of_copy(self, mode: str = FUSER) -> float | None:
        gbps = self.gbps(mode)
        if gbps is None or not self.copy_gbps:
            return None
        return 100.0 * gbps / self.copy_gbps


@dataclass
class SuiteResult:
    metadata: dict[str, Any]
    options: dict[str, Any]
    mode_names: list[str]  # the table's mode columns, in order
    copy_bandwidth_gbps: dict[str, float] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)

    @property
    def failed_rows(self) -> list[Row]:
        return [row for row in self.rows if row.failed]
