"""Runs the suite: for every device, dtype, workload and size, each mode in turn.

Per row: eager's result is the reference; each mode builds its own fresh function under
its own JIT switches, warms up, is checked against eager and has its fusion groups
counted. Then (unless --smoke) the modes are timed in TIMING_ROUNDS interleaved rounds,
each under its own switches again, so that a machine whose speed drifts during the row
(small calls are bound by CPU time per call) slows every mode alike. Model rows
(fuser/bench/models.py) then record each mode's host time per call and, from the
profiler, the ATen elementwise kernels it launches per call. Nothing a mode does
(unavailable, raising, a wrong result) stops the run: it is recorded in the row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

import fuser
from fuser.bench.bandwidth import copy_bandwidth_gbps
from fuser.bench.correctness import mismatch, random_mismatch, short_reason
from fuser.bench.elementwise_count import elementwise_kernels_per_call
from fuser.bench.graph_stats import count_groups, optimized_graph
from fuser.bench.jit_flags import jit_flags
from fuser.bench.machine import last_level_cache_bytes, machine_metadata
from fuser.bench.models import EVERY_MODEL_WORKLOAD, ModelWorkload, placed
from fuser.bench.modes import EAGER, FUSER, MODES, Mode
from fuser.bench.presets import COPY_BUDGET, Preset, dtypes_for
from fuser.bench.progress import Progress
from fuser.bench.results import ModeResult, Row, SuiteResult
from fuser.bench.timing import (
    Args,
    copies_needed,
    host_samples,
    input_copies,
    sample_turn,
    summarize,
    synchronize,
    tensor_bytes,
    warm_up,
)
from fuser.bench.workloads import (
    WORKLOADS,
    Workload,
    make_inputs,
    shape_label,
    training_step,
)


@dataclass(frozen=True)
class RunOptions:
    preset: Preset
    devices: Sequence[torch.device]
    workloads: Sequence[str]
    modes: Sequence[str]  # always starts with eager, the reference
    dtype_names: Sequence[str] | None = None  # None: every dtype of the device

    def dtypes(self, device: torch.device) -> list[torch.dtype]:
        return [
            t
            for t in dtypes_for(device)
            if self.dtype_names is None or _dtype_name(t) in self.dtype_names
        ]

    def sizes(self, workload: Workload) -> list[str]:
        """The preset's sizes that `workload` has (models have tiny and medium only)."""
        return [size for size in self.preset.sizes if size in workload.sizes]

    def workloads_for(self, dtype: torch.dtype) -> list[str]:
        """The workloads with rows in `dtype`: autocast ones take float32 inputs only."""
        return [
            name
            for name in self.workloads
            if not workload_named(name).autocast or dtype == torch.float32
        ]

    def row_count(self) -> int:
        return sum(
            len(self.sizes(workload_named(name)))
            for d in self.devices
            for t in self.dtypes(d)
            for name in self.workloads_for(t)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "preset": self.preset.name,
            "sizes": list(self.preset.sizes),
            "timed": self.preset.timed,
            "warmup_calls": self.preset.warmup_calls,
            "budget_seconds": self.preset.budget.seconds,
            "min_reps": self.preset.budget.min_reps,
            "max_reps": self.preset.budget.max_reps,
            "devices": [str(d) for d in self.devices],
            "workloads": list(self.workloads),
            "modes": list(self.modes),
        }


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def workload_named(name: str) -> Workload:
    """A kernel workload (workloads.py) or a model workload (models.py)."""
    return WORKLOADS[name] if name in WORKLOADS else EVERY_MODEL_WORKLOAD[name]


# Each mode's timing budget is spent in this many rounds, the modes taking turns. On
# the lent H100, per-call rows (bound by CPU time) drifted by up to 1.3x within a row
# with 5 rounds (one mode's median 6803 us, its minimum 5223): shorter turns put every
# mode's samples under more of the same machine states.
TIMING_ROUNDS = 20


def autograd_mode(training: bool) -> Any:
    """Gradients recorded for a training step; none for inference."""
    return torch.enable_grad() if training else torch.no_grad()


def build_call(mode: Mode, workload: Workload, device: torch.device) -> tuple[Any, Any]:
    """(what a call runs, the mode's own function, whose graph holds its groups). An
    autocast workload's forward runs under autocast; a training step's backward not."""
    fn = mode.build(workload)
    forward = workload.under_autocast(fn, device)
    if not workload.training:
        return forward, fn
    # A model's training step differentiates its weights too.
    parameters = list(fn.parameters()) if isinstance(fn, torch.nn.Module) else []
    return training_step(forward, parameters), fn


@dataclass
class PreparedMode:
    mode: Mode
    result: ModeResult
    fn: Any = None  # built and warmed up; None when it cannot be timed
    actual: Any = None  # the last warm-up call's result
    samples: list[int] = field(default_factory=list)


def prepare_mode(
    mode: Mode,
    workload: Workload,
    arg_sets: Sequence[Args],
    expected: Any,
    dtype: torch.dtype,
    device: torch.device,
    preset: Preset,
) -> PreparedMode:
    """One mode on one row: build, warm up, check against eager, count groups."""
    prepared = PreparedMode(mode, ModeResult(mode.name))
    result = prepared.result
    reason = mode.unavailable_reason(device)
    if reason is not None:
        result.na_reason = reason
        return prepared
    try:
        # The switches stay set from the fresh function's first call to its last warm-up
        # call: a fuser is chosen when the graph is optimized, on call 2.
        with jit_flags(mode.flags(device)), autograd_mode(workload.training):
            fn, own_fn = build_call(mode, workload, device)
            actual = warm_up(fn, arg_sets, preset.warmup_calls)
            synchronize(device)
            prepared.actual = actual
            tolerance_dtype = workload.autocast_dtype(device) or dtype
            if workload.dropout is not None:
                result.mismatch = random_mismatch(
                    actual, expected, dtype, workload.dropout, training=workload.training
                )
            else:
                result.mismatch = mismatch(
                    actual,
                    expected,
                    tolerance_dtype,
                    norm_wise=workload.training or workload.long_sums,
                    model=isinstance(workload, ModelWorkload),
                )
            if mode.group_kind is not None:
                with workload.autocast_context(device):
                    graph = optimized_graph(own_fn, arg_sets[0])
                if graph is not None:
                    result.groups = count_groups(graph, mode.group_kind)
    except Exception as error:  # a mode that raises is reported, never fatal
        result.na_reason = short_reason(error)
        return prepared
    if preset.timed:
        prepared.fn = fn
    return prepared


def judge_against_torchscript(prepared: Sequence[PreparedMode], dtype: torch.dtype) -> None:
    """A frozen model can differ from eager beyond the model tolerance in TorchScript
    itself, fusion off (batch norms folded into convolution weights, other convolution
    algorithms: timm's regnetz_b16 on the H100, 0.27% norm-wise). Where the `script`
    mode's result differs so, every other scripted mode that differs from eager is judged
    against the `script` result instead: the fuser must compute what TorchScript does."""
    script = next((p for p in prepared if p.mode.name == "script"), None)
    if script is None or script.actual is None or script.result.mismatch is None:
        return
    for other in prepared:
        result = other.result
        if other is script or other.actual is None or result.mismatch is None:
            continue
        if other.mode.group_kind is None:  # eager's own modes: nothing to excuse
            continue
        if mismatch(other.actual, script.actual, dtype, model=True) is None:
            result.eager_difference = result.mismatch.splitlines()[0]
            result.mismatch = None


def time_interleaved(
    modes: Sequence[PreparedMode],
    arg_sets: Sequence[Args],
    device: torch.device,
    preset: Preset,
    training: bool = False,
) -> None:
    """Times every prepared mode in TIMING_ROUNDS rounds, each mode under its own
    switches in each round (each turn after one untimed call: timing.sample_turn), and
    records the median and minimum of all its timed calls."""
    share = preset.budget.share(TIMING_ROUNDS)
    position = 0  # of the input rotation the modes share
    for _ in range(TIMING_ROUNDS):
        for prepared in modes:
            if prepared.fn is None:
                continue
            try:
                with jit_flags(prepared.mode.flags(device)), autograd_mode(training):
                    samples, position = sample_turn(prepared.fn, arg_sets, device, share, position)
                    prepared.samples += samples
            except Exception as error:  # reported, never fatal
                prepared.result.na_reason = short_reason(error)
                prepared.fn = None
                prepared.samples = []
    for prepared in modes:
        if prepared.samples:
            timing = summarize(prepared.samples)
            result = prepared.result
            result.time_us, result.min_us, result.reps = (
                timing.median_us,
                timing.min_us,
                timing.reps,
            )


def record_call_costs(
    modes: Sequence[PreparedMode],
    arg_sets: Sequence[Args],
    device: torch.device,
    preset: Preset,
    training: bool = False,
) -> None:
    """Each timed mode's host time per call (on CPU, its time) and ATen elementwise
    kernels per call, under its own switches (and gradients for a training step), after
    it was timed."""
    for prepared in modes:
        if prepared.fn is None:
            continue
        result = prepared.result
        try:
            with jit_flags(prepared.mode.flags(device)), autograd_mode(training):
                result.elementwise_kernels = elementwise_kernels_per_call(
                    prepared.fn, arg_sets, device
                )
                result.host_us = result.time_us
                if device.type == "cuda":
                    samples = host_samples(prepared.fn, arg_sets, device, preset.budget)
                    result.host_us = summarize(samples).median_us
        except Exception as error:  # reported, never fatal
            result.na_reason = short_reason(error)


def _stat(name: str) -> int:
    return int(fuser.stats().get(name, 0))


def run_row(
    workload: Workload,
    size: str,
    dtype: torch.dtype,
    device: torch.device,
    options: RunOptions,
    cache_bytes: int,
    copy_gbps: float | None,
    progress: Progress,
) -> Row:
    label = f"{device} {_dtype_name(dtype)} {workload.name} {size}"
    workload = placed(workload, size, device, dtype)
    row = Row(
        workload=workload.name,
        size=size,
        shape=shape_label(workload.dims(size, device)),
        dtype=_dtype_name(dtype),
        device=str(device),
        bytes_per_call=0,
        copy_gbps=copy_gbps,
    )
    inputs = make_inputs(workload, size, dtype, device)
    try:
        with autograd_mode(workload.training):
            expected = build_call(MODES[EAGER], workload, device)[0](*inputs)
    except Exception as error:
        row.failure = f"eager raised {short_reason(error)}"
        return row
    row.bytes_per_call = tensor_bytes(inputs) + tensor_bytes(expected)
    copies = 1
    if options.preset.timed:
        copies = copies_needed(tensor_bytes(inputs), cache_bytes)
    arg_sets = input_copies(inputs, copies)

    prepared = []
    for name in options.modes:
        progress.show(f"{label}: {name}")
        before = (
            _stat("kernels_compiled"),
            _stat("disk_cache_hits"),
            _stat("interpreted_runs"),
        )
        mode = MODES[name]
        prepared.append(
            prepare_mode(mode, workload, arg_sets, expected, dtype, device, options.preset)
        )
        row.modes[name] = prepared[-1].result
        if name == FUSER:
            row.groups = prepared[-1].result.groups
            row.kernels_compiled = _stat("kernels_compiled") - before[0]
            row.kernels_from_disk = _stat("disk_cache_hits") - before[1]
            row.interpreted_runs = _stat("interpreted_runs") - before[2]
    if isinstance(workload, ModelWorkload):
        judge_against_torchscript(prepared, workload.autocast_dtype(device) or dtype)
    for p in prepared:
        if p.result.is_wrong:
            p.fn = None
    if options.preset.timed:
        progress.show(f"{label}: timing")
        time_interleaved(prepared, arg_sets, device, options.preset, workload.training)
        if isinstance(workload, ModelWorkload):
            progress.show(f"{label}: profiling")
            record_call_costs(prepared, arg_sets, device, options.preset, workload.training)
    fused = row.modes.get(FUSER)
    if fused is not None and fused.mismatch is not None:
        row.failure = f"fuser result differs from eager:\n{fused.mismatch}"
    elif fused is not None and fused.na_reason is not None:
        row.failure = f"fuser raised {fused.na_reason}"
    return row


def run_suite(
    options: RunOptions,
    progress: Progress,
    row_done: Callable[[SuiteResult], None] | None = None,
) -> SuiteResult:
    """Every row of `options`; `row_done` sees the result so far after each row (the
    command line writes it out, so that a run cut short keeps its finished rows)."""
    result = SuiteResult(
        metadata=machine_metadata(list(options.devices)),
        options=options.to_dict(),
        mode_names=list(options.modes),
    )
    for device in options.devices:
        cache_bytes = last_level_cache_bytes(device)
        copy_gbps = None
        if options.preset.timed:
            progress.show(f"{device}: measuring copy bandwidth")
            copy_gbps = copy_bandwidth_gbps(device, cache_bytes, COPY_BUDGET)
            result.copy_bandwidth_gbps[str(device)] = copy_gbps
        for dtype in options.dtypes(device):
            for name in options.workloads_for(dtype):
                workload = workload_named(name)
                for size in options.sizes(workload):
                    row = run_row(
                        workload,
                        size,
                        dtype,
                        device,
                        options,
                        cache_bytes,
                        copy_gbps,
                        progress,
                    )
                    result.rows.append(row)
                    if row_done is not None:
                        row_done(result)
                    progress.step_done()
                    if row.failure:
                        progress.message(
                            f"FAILED {name} {size} {row.dtype} {device}: {row.failure}"
                        )
    progress.finish()
    return result
