"""Tests of fuser/bench: the --smoke run end to end, and the table, JSON, chart, option
parsing, flag restoring and failure reporting on hand-made results. None of them needs
the fuser to fuse anything."""

from __future__ import annotations

import dataclasses
import importlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import fuser
from fuser.bench import chart, cli, models, runner
from fuser.bench.correctness import mismatch, short_reason
from fuser.bench.elementwise_count import (
    count_elementwise,
    elementwise_kernels_by_op,
    elementwise_kernels_per_call,
)
from fuser.bench.graph_stats import count_groups
from fuser.bench.jit_flags import NO_FUSION, current_flags, jit_flags
from fuser.bench.json_report import read_json, to_json_dict, write_json
from fuser.bench.machine import busy_note, cpu_last_level_cache_bytes, machine_metadata
from fuser.bench.models import MODEL_WORKLOADS, model_unavailable, placed
from fuser.bench.modes import MODES
from fuser.bench.presets import FULL, QUICK, SMOKE
from fuser.bench.progress import Progress
from fuser.bench.results import ModeResult, Row, SuiteResult
from fuser.bench.table import columns, render_smoke_list, render_table, row_cells
from fuser.bench.timing import (
    MAX_COPIES,
    TimingBudget,
    copies_needed,
    input_copies,
    sample_turn,
    tensor_bytes,
    warm_up,
)
from fuser.bench.workloads import WORKLOADS, make_inputs, training_step

MODE_NAMES = ["eager", "script", "fuser", "nnc", "onednn", "compile"]


def _row(**overrides: Any) -> Row:
    """A measured row: eager 200 us, script 100 us, fuser 50 us, nnc n/a, onednn wrong,
    compile 400 us; 1e6 bytes per call on a device that copies at 40 GB/s."""
    modes = {
        "eager": ModeResult("eager", time_us=200.0, reps=10),
        "script": ModeResult("script", time_us=100.0, reps=10),
        "fuser": ModeResult("fuser", time_us=50.0, reps=10, groups=1),
        "nnc": ModeResult("nnc", na_reason="NNC on CPU needs LLVM"),
        "onednn": ModeResult("onednn", mismatch="Tensor-likes are not close!\nMismatched 3"),
        "compile": ModeResult("compile", time_us=400.0, reps=10),
    }
    fields: dict[str, Any] = dict(
        workload="elementwise_chain",
        size="medium",
        shape="N1024xH1024",
        dtype="float32",
        device="cpu",
        bytes_per_call=1_000_000,
        copy_gbps=40.0,
        groups=1,
        kernels_compiled=1,
        kernels_from_disk=0,
        modes=modes,
    )
    fields.update(overrides)
    return Row(**fields)


def _suite(rows: list[Row]) -> SuiteResult:
    return SuiteResult(
        metadata=machine_metadata([torch.device("cpu")]),
        options={"preset": "quick"},
        mode_names=MODE_NAMES,
        copy_bandwidth_gbps={"cpu": 40.0},
        rows=rows,
    )


# --- derived numbers -------------------------------------------------------------------


def test_speedup_is_eager_time_over_mode_time() -> None:
    row = _row()
    assert row.speedup("fuser") == pytest.approx(4.0)
    assert row.speedup("script") == pytest.approx(2.0)
    assert row.speedup("compile") == pytest.approx(0.5)
    assert row.speedup("eager") == pytest.approx(1.0)
    assert row.speedup("nnc") is None
    assert row.speedup("onednn") is None


def test_bandwidth_counts_bytes_per_call_over_time() -> None:
    row = _row()
    assert row.gbps("fuser") == pytest.approx(20.0)  # 1e6 bytes in 50 us
    assert row.percent_of_copy("fuser") == pytest.approx(50.0)
    assert _row(copy_gbps=None).percent_of_copy("fuser") is None


def test_kernels_add_compiled_and_loaded_from_disk() -> None:
    assert _row(kernels_compiled=2, kernels_from_disk=3).kernels == 5
    assert _row(kernels_compiled=None).kernels is None


# --- terminal table --------------------------------------------------------------------


def test_table_columns() -> None:
    assert columns(["eager", "fuser", "nnc"]) == [
        "workload",
        "size",
        "shape",
        "dtype",
        "device",
        "groups",
        "kernels",
        "eager us",
        "fuser us",
        "fuser x",
        "nnc us",
        "nnc x",
        "fuser GB/s",
        "% copy",
        "status",
    ]


def test_row_cells_show_times_ratios_and_na() -> None:
    cells = dict(zip(columns(MODE_NAMES), row_cells(_row(), MODE_NAMES), strict=True))
    assert cells["eager us"] == "200.0"
    assert cells["fuser us"] == "50.0"
    assert cells["fuser x"] == "4.00x"
    assert cells["script x"] == "2.00x"
    assert cells["compile us"] == "400.0"
    assert cells["compile x"] == "0.50x"
    assert cells["nnc us"] == "n/a"
    assert cells["nnc x"] == "n/a"
    assert cells["onednn us"] == "wrong"
    assert cells["fuser GB/s"] == "20.0"
    assert cells["% copy"] == "50"
    assert cells["groups"] == "1"
    assert cells["kernels"] == "1"
    assert cells["status"] == "ok"


def test_a_row_says_how_many_group_calls_ran_interpreted() -> None:
    row = _row(interpreted_runs=3)
    cells = dict(zip(columns(MODE_NAMES), row_cells(row, MODE_NAMES), strict=True))
    assert cells["status"] == "ok (3 interpreted)"
    assert "interpreted=3" in render_smoke_list(_suite([row]))
    assert "interpreted=0" in render_smoke_list(_suite([_row(interpreted_runs=0)]))


def test_large_times_lose_their_decimals() -> None:
    row = _row()
    row.modes["eager"].time_us = 12345.67
    cells = dict(zip(columns(MODE_NAMES), row_cells(row, MODE_NAMES), strict=True))
    assert cells["eager us"] == "12346"


def test_rendered_table_aligns_columns_and_explains_na_and_failures() -> None:
    failed = _row(workload="gru_cell", failure="fuser result differs from eager:\nMismatch")
    failed.modes["fuser"] = ModeResult("fuser", mismatch="Mismatch")
    text = render_table(_suite([_row(), failed]))
    lines = text.splitlines()
    header, rule, first, second = lines[:4]
    assert header.split()[:3] == ["workload", "size", "shape"]
    assert set(rule.replace(" ", "")) == {"-"}
    # Every column starts where its header starts.
    assert first.index("elementwise_chain") == header.index("workload")
    assert "4.00x" in first and first.rstrip().endswith("ok")
    assert second.rstrip().endswith("FAILED")
    assert "wrong" in second.split()
    assert "n/a: nnc on cpu: NNC on CPU needs LLVM" in lines
    assert any(line.startswith("wrong: onednn on elementwise_chain medium") for line in lines)
    assert any(line.startswith("FAILED: gru_cell medium float32 cpu") for line in lines)
    assert "cpu 40.0 GB/s" in text
    # Each reason once, however many rows share it.
    assert sum(line.startswith("n/a: nnc on cpu") for line in lines) == 1


def test_smoke_list_says_pass_or_failed_per_row() -> None:
    failed = _row(workload="gru_cell", failure="fuser raised RuntimeError: boom")
    text = render_smoke_list(_suite([_row(), failed]))
    lines = text.splitlines()
    assert lines[0].startswith("PASS   elementwise_chain medium float32 cpu")
    assert "fuser ok" in lines[0] and "nnc n/a" in lines[0] and "onednn wrong" in lines[0]
    assert lines[1].startswith("FAILED gru_cell")
    assert "RuntimeError: boom" in lines[2]
    assert "smoke check: 1 of 2 rows passed" in lines


# --- JSON ------------------------------------------------------------------------------


def test_json_round_trip_keeps_every_field(tmp_path: Path) -> None:
    suite = _suite([_row(), _row(workload="gru_cell", failure="boom")])
    path = tmp_path / "out" / "results.json"
    write_json(suite, path)
    assert read_json(path) == suite


def test_json_has_metadata_and_derived_numbers(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    write_json(_suite([_row()]), path)
    data = json.loads(path.read_text())
    for key in ("platform", "cpu_count", "torch_version", "cuda_device_name", "fuser_version"):
        assert key in data["metadata"]
    assert data["metadata"]["torch_version"] == torch.__version__
    assert data["metadata"]["devices"]["cpu"]["last_level_cache_bytes"] > 0
    row = data["rows"][0]
    assert row["status"] == "ok" and row["kernels"] == 1
    assert row["modes"]["fuser"]["speedup_vs_eager"] == pytest.approx(4.0)
    assert row["modes"]["fuser"]["gbps"] == pytest.approx(20.0)
    assert row["modes"]["fuser"]["percent_of_copy"] == pytest.approx(50.0)
    assert row["modes"]["nnc"]["speedup_vs_eager"] is None
    assert row["modes"]["nnc"]["na_reason"] == "NNC on CPU needs LLVM"
    assert data == to_json_dict(read_json(path))


# --- chart -----------------------------------------------------------------------------


def test_chart_is_skipped_without_matplotlib(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(chart, "matplotlib_available", lambda: False)
    path = tmp_path / "speedup.png"
    assert chart.write_chart(_suite([_row()]), path) is False
    assert not path.exists()


def test_chart_is_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "speedup.png"
    assert chart.write_chart(_suite([_row()]), path) is True
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- measuring helpers -----------------------------------------------------------------


def test_copies_fill_four_times_the_cache() -> None:
    assert copies_needed(1 << 20, 8 << 20) == 32
    assert copies_needed(64 << 20, 8 << 20) == 1
    assert copies_needed(1, 8 << 20) == MAX_COPIES
    copies = input_copies((torch.randn(3), 2.0, torch.randn(2).requires_grad_()), 3)
    assert len(copies) == 3 and copies[2][1] == 2.0
    assert copies[1][0] is not copies[0][0] and torch.equal(copies[1][0], copies[0][0])
    # A training step's inputs: each copy a leaf of its own that requires grad.
    assert not copies[1][0].requires_grad
    assert copies[1][2].requires_grad and copies[1][2].is_leaf
    assert tensor_bytes((torch.zeros(4), [torch.zeros(2, dtype=torch.float64)])) == 32


def test_a_turn_starts_untimed_and_its_inputs_rotate_on_from_the_last_turn() -> None:
    calls: list[int] = []
    arg_sets = [(0,), (1,), (2,)]
    budget = TimingBudget(seconds=0.0, min_reps=2, max_reps=2)
    samples, position = sample_turn(calls.append, arg_sets, torch.device("cpu"), budget, 0)
    assert len(samples) == 2 and position == 3 and calls == [0, 1, 2]
    samples, position = sample_turn(calls.append, arg_sets, torch.device("cpu"), budget, 4)
    assert len(samples) == 2 and position == 7 and calls[3:] == [1, 2, 0]


def test_cache_size_comes_from_the_highest_level(tmp_path: Path) -> None:
    for index, (level, size) in enumerate([(1, "32K"), (2, "1024K"), (3, "32768K")]):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        (folder / "level").write_text(f"{level}\n")
        (folder / "size").write_text(f"{size}\n")
    assert cpu_last_level_cache_bytes(str(tmp_path)) == 32 * 1024 * 1024
    assert cpu_last_level_cache_bytes(str(tmp_path / "missing")) == 32 * 1024 * 1024


def test_busy_machine_gets_a_note() -> None:
    assert busy_note(None) is None
    assert busy_note(0.0) is None
    assert "busy" in (busy_note(1000.0) or "")


def test_group_count_walks_sub_blocks() -> None:
    fn = torch.jit.CompilationUnit(
        """
def f(x, n: int):
    y = x * 2
    for _ in range(n):
        if n > 1:
            y = y * x
    return y
"""
    ).f
    assert count_groups(fn.graph, "aten::mul") == 2
    assert count_groups(fn.graph, "fuser::FusionGroup") == 0


def test_mismatch_gives_a_reason_and_respects_dtype() -> None:
    x = torch.randn(8)
    assert mismatch(x.clone(), x, torch.float32) is None
    assert "not close" in (mismatch(x + 1, x, torch.float32) or "")
    assert mismatch(x.half() * (1 + 2e-3), x.half(), torch.float16) is None
    assert "dtype" in (mismatch(x.double(), x, torch.float32) or "")
    assert short_reason(RuntimeError("first\nsecond")) == "RuntimeError: first"


def test_norm_wise_mismatch_judges_each_tensor_as_a_whole() -> None:
    # One element 1e-4 off in a 256x256 tensor of unit entries (norm ~256): beyond
    # float32's element-wise atol, yet 4e-7 of the norm, inside the 1e-6 allowed.
    grads = (torch.randn(256, 256), torch.randn(8))
    near = (grads[0].clone(), grads[1])
    near[0][3, 5] += 1e-4
    assert mismatch(near, grads, torch.float32) is not None
    assert mismatch(near, grads, torch.float32, norm_wise=True) is None
    far = (grads[0] * (1 + 1e-5), grads[1])
    assert "item [0]" in (mismatch(far, grads, torch.float32, norm_wise=True) or "")
    nan = (grads[0], grads[1] * float("nan"))
    assert "item [1]" in (mismatch(nan, grads, torch.float32, norm_wise=True) or "")
    double = (grads[0], grads[1].double())
    assert "float64" in (mismatch(double, grads, torch.float32, norm_wise=True) or "")
    half = tuple(g.half() for g in grads)
    rounded = tuple(g * (1 + 2e-3) for g in half)
    assert mismatch(rounded, half, torch.float16, norm_wise=True) is None


def test_jit_flags_are_restored_even_on_error() -> None:
    before = current_flags()
    wanted = dataclasses.replace(NO_FUSION, onednn=not before.onednn)
    with pytest.raises(ValueError), jit_flags(wanted):
        assert current_flags().onednn == wanted.onednn
        raise ValueError
    assert current_flags() == before


def pattern(shape: tuple[int, ...], rows: int) -> torch.Tensor:
    """training_step's upstream gradient: 0.5 to 1.5 by element index, over sqrt(rows)."""
    n = 1
    for s in shape:
        n *= s
    return ((torch.arange(n) % 11) * 0.1 + 0.5).view(shape) * rows**-0.5


def test_training_step_returns_the_gradient_of_every_input() -> None:
    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, requires_grad=True)
    step = training_step(lambda a, b, scale: (a * b * scale, a.sum()))
    grad_x, grad_w = step(x, w, 2.0)
    # 3 rows of the product, the sum's one (its gradient: the pattern's first value).
    up = pattern((3, 4), 3)
    torch.testing.assert_close(grad_x, w.detach().expand(3, 4) * 2 * up + 0.5)
    torch.testing.assert_close(grad_w, (x.detach() * up).sum(0) * 2)
    # Not equal along the batch: BatchNorm's input gradient would vanish.
    assert not torch.equal(up[0], up[1])
    # A second call reuses the upstream gradients, unchanged: the same gradients again.
    again_x, again_w = step(x, w, 2.0)
    assert torch.equal(again_x, grad_x) and torch.equal(again_w, grad_w)
    # Another shape or dtype gets its own.
    y = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    grad_y, _ = step(y, w.double(), 1.0)
    torch.testing.assert_close(
        grad_y, w.detach().double().expand(2, 4) * pattern((2, 4), 2).double() + 0.5
    )


def test_training_step_differentiates_the_parameters_it_is_given() -> None:
    linear = torch.nn.Linear(4, 3)
    x = torch.randn(5, 4, requires_grad=True)
    grad_x, grad_w, grad_b = training_step(linear, list(linear.parameters()))(x)
    up = pattern((5, 3), 5)
    torch.testing.assert_close(grad_x, up @ linear.weight.detach())
    torch.testing.assert_close(grad_w, up.t() @ x.detach())
    torch.testing.assert_close(grad_b, up.sum(0))


def test_every_workload_is_valid_torchscript_and_matches_its_eager_twin() -> None:
    for workload in WORKLOADS.values():
        inputs = make_inputs(workload, "tiny", torch.float32, torch.device("cpu"))
        assert all(t.abs().sum() > 0 for t in inputs)  # random data, never zeros
        with torch.no_grad(), jit_flags(NO_FUSION):
            scripted = workload.scripted_function()
            assert scripted is not workload.scripted_function()  # fresh every time
            with torch.random.fork_rng(devices=[]):
                got = scripted(*inputs)  # random dropout: both draw from one seed
            torch.testing.assert_close(got, workload.eager_function()(*inputs))


# --- options and failure handling ------------------------------------------------------


def test_options_split_lists_and_keep_suite_order() -> None:
    options, out = cli.parse_options(
        ["--smoke", "--workload", "lstm_cell,gelu_bias", "--workload", "norm_tail"]
    )
    assert options.preset is SMOKE
    assert list(options.workloads) == ["gelu_bias", "norm_tail", "lstm_cell"]
    assert options.modes[0] == "eager" and "compile" not in options.modes
    assert out == Path("bench_out")
    options, _ = cli.parse_options(["--full", "--mode", "compile", "--device", "cpu"])
    assert list(options.modes) == ["eager", "compile"]
    assert options.preset.name == "full"
    assert [d.type for d in options.devices] == ["cpu"]


def test_size_and_dtype_narrow_the_rows() -> None:
    options, _ = cli.parse_options(["--full", "--size", "large,small", "--dtype", "float16"])
    assert options.preset.sizes == ("small", "large")
    assert options.preset.budget == FULL.budget
    assert options.dtypes(torch.device("cpu")) == []  # CPU runs float32 only
    assert options.row_count() == 0 or torch.cuda.is_available()


def test_bad_options_exit_with_usage_error() -> None:
    bad = (["--workload", "nope"], ["--mode", "nope"], ["--quick", "--full"], ["--size", "huge"])
    for argv in bad + (["--dtype", "int8"],):
        with pytest.raises(SystemExit) as exit_info:
            cli.parse_options(argv)
        assert exit_info.value.code == 2


def _raising(workload: Any) -> Any:
    raise RuntimeError("peer exploded\nwith details")


def test_a_raising_peer_is_na_not_a_crash() -> None:
    mode = dataclasses.replace(MODES["script"], is_peer=True, build=_raising)
    workload = WORKLOADS["elementwise_chain"]
    args = (torch.randn(4, 4), torch.randn(4, 4))
    expected = workload.eager_function()(*args)
    cpu = torch.device("cpu")
    prepared = runner.prepare_mode(mode, workload, [args], expected, torch.float32, cpu, SMOKE)
    result = prepared.result
    assert prepared.fn is None
    assert result.time_us is None and result.na_reason == "RuntimeError: peer exploded"


def _prepared(name: str, calls: list[str], fail: bool = False) -> runner.PreparedMode:
    def fn(*args: Any) -> None:
        calls.append(name)
        if fail and len(calls) > 2:
            raise RuntimeError("lost the device")

    mode = dataclasses.replace(MODES["eager"], name=name)
    return runner.PreparedMode(mode, ModeResult(name), fn=fn)


def test_modes_are_timed_in_interleaved_rounds() -> None:
    # One timed call per mode and round (after one untimed call): the modes take turns,
    # so a drifting machine slows all.
    calls: list[str] = []
    modes = [_prepared("a", calls), _prepared("b", calls)]
    preset = dataclasses.replace(FULL, budget=TimingBudget(seconds=0.0, min_reps=5, max_reps=5))
    runner.time_interleaved(modes, [()], torch.device("cpu"), preset)
    assert calls == ["a", "a", "b", "b"] * runner.TIMING_ROUNDS
    for prepared in modes:
        assert prepared.result.reps == runner.TIMING_ROUNDS
        assert prepared.result.time_us is not None and prepared.result.time_us >= 0


def test_interleaved_modes_share_one_input_rotation() -> None:
    # Each call, whichever mode makes it, takes the next copy of the inputs: a mode's
    # first call of a turn does not read the copy the mode before it just read.
    read: list[int] = []

    def mode(name: str) -> runner.PreparedMode:
        spec = dataclasses.replace(MODES["eager"], name=name)
        return runner.PreparedMode(spec, ModeResult(name), fn=read.append)

    preset = dataclasses.replace(FULL, budget=TimingBudget(seconds=0.0, min_reps=5, max_reps=5))
    runner.time_interleaved([mode("a"), mode("b")], [(0,), (1,), (2,)], torch.device("cpu"), preset)
    assert read == [i % 3 for i in range(4 * runner.TIMING_ROUNDS)]


def test_a_mode_raising_while_timed_is_na_and_the_others_go_on() -> None:
    calls: list[str] = []
    modes = [_prepared("flaky", calls, fail=True), _prepared("steady", calls)]
    preset = dataclasses.replace(FULL, budget=TimingBudget(seconds=0.0, min_reps=5, max_reps=5))
    runner.time_interleaved(modes, [()], torch.device("cpu"), preset)
    assert modes[0].result.time_us is None
    assert modes[0].result.na_reason == "RuntimeError: lost the device"
    assert modes[1].result.reps == runner.TIMING_ROUNDS


def _off_by_one(workload: Any) -> Any:
    eager = workload.eager_function()
    return lambda *args: eager(*args) + 1


def test_a_wrong_fuser_result_fails_the_row_and_the_exit_code(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setitem(
        runner.MODES, "fuser", dataclasses.replace(MODES["fuser"], build=_off_by_one)
    )
    before = current_flags()
    argv = ["--smoke", "--workload", "elementwise_chain", "--mode", "fuser", "--device", "cpu"]
    assert cli.main([*argv, "--out", str(tmp_path)]) == 1
    assert current_flags() == before
    row = json.loads((tmp_path / "results.json").read_text())["rows"][0]
    assert row["status"] == "FAILED"
    assert "differs from eager" in row["failure"]
    assert row["modes"]["fuser"]["mismatch"]


def test_progress_writes_lines_to_a_log(tmp_path: Path) -> None:
    with open(tmp_path / "log", "w+") as stream:
        progress = Progress(2, stream)
        progress.show("cpu float32 gelu_bias medium: fuser")
        progress.step_done()
        progress.message("FAILED something")
        progress.finish()
        stream.seek(0)
        lines = stream.read().splitlines()
    assert lines[0].startswith("[0/2") and lines[0].endswith("gelu_bias medium: fuser")
    assert lines[1] == "FAILED something"


# --- model workloads ---------------------------------------------------------------------


CPU = torch.device("cpu")


@pytest.mark.parametrize("name", list(MODEL_WORKLOADS))
def test_model_workloads_script_freeze_and_match_eager_on_cpu(name: str) -> None:
    reason = model_unavailable(MODEL_WORKLOADS[name])
    if reason is not None:
        pytest.skip(reason)
    workload = placed(MODEL_WORKLOADS[name], "tiny", CPU, torch.float32)
    (x,) = make_inputs(workload, "tiny", torch.float32, CPU)
    with torch.no_grad(), jit_flags(NO_FUSION):
        eager = workload.eager_function()
        frozen = workload.scripted_function()
        # A fresh module per mode, with the same weights.
        assert frozen is not workload.scripted_function()
        again = workload.eager_function()
        assert again is not eager
        for key, value in eager.state_dict().items():
            assert torch.equal(value, again.state_dict()[key]), key
        assert isinstance(frozen, torch.jit.ScriptModule)
        # Frozen: the weights are constants; a training row's stay parameters.
        assert bool(list(frozen.parameters())) == workload.training
        # Training mode where the row's dropouts are on (both then draw from one seed)
        # or its BatchNorms take batch statistics.
        assert eager.training == (workload.dropout is not None or workload.train_mode)
        with torch.random.fork_rng(devices=[]):
            expected = eager(x)
        assert mismatch(frozen(x), expected, torch.float32, model=True) is None


def test_a_training_row_scripts_a_module_with_executors_of_its_own() -> None:
    """An unfrozen scripted module shares its class's graph executors: the first mode
    to run would fix the optimized graph every later mode is timed with. Each call
    scripts a type of its own, so a fuser mode after script mode still forms groups."""
    workload = placed(MODEL_WORKLOADS["gpt2_block_train"], "tiny", CPU, torch.float32)
    first, second = workload.scripted_function(), workload.scripted_function()
    assert first._c._type() != second._c._type()
    (x,) = make_inputs(workload, "tiny", torch.float32, CPU)
    x.requires_grad_()
    with jit_flags(NO_FUSION):
        for _ in range(3):
            first(x).sum().backward()
    fuser.reset_stats()
    with fuser.enabled(True):
        for _ in range(3):
            second(x).sum().backward()
    assert fuser.stats()["kernel_launches"] > 0, fuser.stats()


def test_gpt2_block_through_every_mode_matches_eager_on_cpu() -> None:
    workload = placed(MODEL_WORKLOADS["gpt2_block"], "tiny", CPU, torch.float32)
    arg_sets = [make_inputs(workload, "tiny", torch.float32, CPU)]
    with torch.no_grad():
        expected = workload.eager_function()(*arg_sets[0])
    for mode in MODES.values():
        if mode.name in SMOKE.default_modes:
            result = runner.prepare_mode(
                mode, workload, arg_sets, expected, torch.float32, CPU, SMOKE
            ).result
            assert result.mismatch is None, (mode.name, result.mismatch)
            if not mode.is_peer:
                assert result.na_reason is None, (mode.name, result.na_reason)
            if mode.name == "fuser":
                assert result.groups is not None and result.groups >= 1  # the GELU chain


def test_autocast_model_rows_fuse_under_autocast_and_match_eager_autocast_on_cpu() -> None:
    workload = placed(MODEL_WORKLOADS["gpt2_block_autocast"], "tiny", CPU, torch.float32)
    assert workload.autocast_dtype(CPU) == torch.bfloat16
    arg_sets = [make_inputs(workload, "tiny", torch.float32, CPU)]
    with torch.no_grad(), workload.autocast_context(CPU):
        expected = workload.eager_function()(*arg_sets[0])
    assert expected.dtype == torch.float32  # the residual adds return to float32
    fused = runner.prepare_mode(
        MODES["fuser"], workload, arg_sets, expected, torch.float32, CPU, SMOKE
    ).result
    assert fused.na_reason is None and fused.mismatch is None, fused
    assert fused.groups is not None and fused.groups >= 1
    # Without autocast the same model is a different row, not the same one twice.
    assert MODEL_WORKLOADS["gpt2_block"].autocast is None


def test_model_tolerance_is_norm_wise() -> None:
    expected = torch.randn(1000)
    near = expected.clone()
    near[0] += 1e-3 * expected.norm()  # one element far off, the tensor as a whole close
    assert mismatch(near, expected, torch.float32) is not None
    assert mismatch(near, expected, torch.float32, model=True) is not None
    assert mismatch(expected * (1 + 1e-5), expected, torch.float32, model=True) is None
    assert mismatch(expected * (1 + 1e-1), expected, torch.float32, model=True) is not None
    half = expected.half()
    assert mismatch(half * (1 + 4e-3), half, torch.float16, model=True) is None


def _chain(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x * y + 1).relu().sigmoid()  # mul, add, relu (calling clamp_min), sigmoid


def test_elementwise_count_on_a_known_function() -> None:
    args = [(torch.randn(64, 64), torch.randn(64, 64))]
    assert elementwise_kernels_per_call(_chain, args, CPU, calls=3) == 4
    # A copy counts as the kernel it is, also inside a non-elementwise op.
    transposed = [(torch.randn(64, 32),)]
    assert elementwise_kernels_per_call(lambda t: t.t().contiguous(), transposed, CPU) == 1
    assert elementwise_kernels_per_call(lambda t: t.contiguous(), transposed, CPU) == 0


def test_elementwise_kernels_by_op_name_each_counted_op_and_its_caller() -> None:
    x, y = torch.randn(64, 64), torch.randn(64, 64)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        _chain(x, y)
        x.t().contiguous()
    events = prof.events()
    by_op = elementwise_kernels_by_op(events, CPU)
    assert sum(by_op.values()) == count_elementwise(events, CPU) == 5
    assert by_op[("aten::relu", "")] == 1  # its clamp_min is the same kernel
    assert by_op[("aten::clone", "aten::contiguous")] == 1  # the copy, in its caller
    assert {op for op, _ in by_op} == {
        "aten::mul",
        "aten::add",
        "aten::relu",
        "aten::sigmoid",
        "aten::clone",
    }


def test_elementwise_count_leaves_out_what_the_fuser_fused() -> None:
    with torch.no_grad(), jit_flags(MODES["fuser"].flags(CPU)):
        scripted = torch.jit.script(_chain)
        args = [(torch.randn(64, 64), torch.randn(64, 64))]
        warm_up(scripted, args, 3)
        assert elementwise_kernels_per_call(scripted, args, CPU) == 0


@dataclasses.dataclass
class _Kernel:
    name: str


@dataclasses.dataclass
class _Event:
    name: str
    device_type: Any
    cpu_parent: Any = None
    kernels: list[_Kernel] = dataclasses.field(default_factory=list)


def test_elementwise_count_on_cuda_reads_atens_kernel_names() -> None:
    cuda = torch.autograd.DeviceType.CUDA
    names = [
        "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(...)",
        "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>(...)",
        "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<...>>(...)",
        "void at::native::index_elementwise_kernel<128, 4, ...>(...)",  # indexing
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>(...)",
        "void at::native::vectorized_layer_norm_kernel<float, float>(...)",
        "fuser_kernel",  # ours (csrc/codegen)
        "triton_poi_fused_add_0",
    ]
    events = [_Event(name, cuda) for name in names]
    events.append(_Event("aten::add", torch.autograd.DeviceType.CPU))  # the launching op
    assert count_elementwise(events, torch.device("cuda")) == 3


def test_elementwise_kernels_by_op_on_cuda_goes_to_the_outermost_elementwise_op() -> None:
    cpu = torch.autograd.DeviceType.CPU
    add = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(...)"
    forward = _Event("forward", cpu)
    relu = _Event("aten::relu", cpu, cpu_parent=forward)
    clamp = _Event("aten::clamp_min", cpu, cpu_parent=relu, kernels=[_Kernel(add)])
    attention = _Event("aten::scaled_dot_product_attention", cpu, cpu_parent=forward)
    reduce = "void at::native::reduce_kernel<512, 1>(...)"
    where = _Event(
        "aten::where", cpu, cpu_parent=attention, kernels=[_Kernel(add), _Kernel(reduce)]
    )
    ours = _Event("fuser::FusionGroup", cpu, cpu_parent=forward, kernels=[_Kernel("fuser_kernel")])
    events = [forward, relu, clamp, attention, where, ours]
    by_op = elementwise_kernels_by_op(events, torch.device("cuda"))
    assert by_op == {
        ("aten::relu", "forward"): 1,
        ("aten::where", "aten::scaled_dot_product_attention"): 1,
    }


def test_torchvision_that_fails_to_load_is_skipped_with_its_reason(
    monkeypatch: Any, capsys: Any
) -> None:
    real_import = importlib.import_module

    def failing(name: str, *args: Any) -> Any:
        if name.startswith("torchvision"):
            raise RuntimeError("operator torchvision::nms does not exist")
        if name.startswith("timm"):
            raise ImportError("No module named 'timm'")
        return real_import(name, *args)

    monkeypatch.setattr(importlib, "import_module", failing)
    reason = models.torchvision_unavailable()
    assert reason is not None and "RuntimeError" in reason and "torchvision::nms" in reason
    options, _ = cli.parse_options(["--models", "--device", "cpu"])
    assert list(options.workloads) == list(MODEL_WORKLOADS)
    kept = cli.skip_unavailable(options)
    assert list(kept.workloads) == [
        "gpt2_block",
        "gpt2_block_train",
        "gpt2_block_train_dropout",
        "gpt2_block_autocast",
    ]
    printed = capsys.readouterr().out
    assert "skipped resnet50: torchvision does not load" in printed
    assert "skipped mobilenet_v3_large:" in printed
    assert "skipped efficientnet_b0_timm: timm is not installed" in printed


def test_models_are_not_in_the_default_set_and_run_with_models() -> None:
    default, _ = cli.parse_options(["--device", "cpu"])
    assert list(default.workloads) == list(WORKLOADS)
    chosen, _ = cli.parse_options(["--workload", "gpt2_block", "--device", "cpu"])
    assert list(chosen.workloads) == ["gpt2_block"]
    full, _ = cli.parse_options(["--full", "--models", "--device", "cpu"])
    # Models have one benchmark size, medium.
    assert full.sizes(MODEL_WORKLOADS["gpt2_block"]) == ["medium"]
    assert full.row_count() == len(MODEL_WORKLOADS)


def test_the_zoo_runs_with_zoo_only() -> None:
    models_only, _ = cli.parse_options(["--models", "--device", "cpu"])
    assert not set(models_only.workloads) & set(models.ZOO_WORKLOADS)
    zoo, _ = cli.parse_options(["--zoo", "--device", "cpu"])
    assert list(zoo.workloads) == list(models.ZOO_WORKLOADS)
    assert "tv_convnext_tiny" in zoo.workloads and "timm_mixer_b16_224" in zoo.workloads
    assert "hf_bert" in zoo.workloads and "hf_llama" in zoo.workloads
    for name in zoo.workloads:
        workload = runner.workload_named(name)
        assert isinstance(workload, models.ModelWorkload) and not workload.training
        assert zoo.sizes(workload) == ["medium"]
        # transformers' models are traced on 128 tokens; the image classifiers scripted.
        text = name.startswith("hf_")
        assert workload.deploy == ("trace" if text else "script")
        other = {"T": 128} if text else {"HW": 224}
        assert workload.dims("medium", torch.device("cuda")) == {"B": 32, **other}
        assert workload.dims("small", torch.device("cuda")) == {"B": 1, **other}


def test_a_traced_model_workload_is_traced_on_its_row_and_frozen() -> None:
    block = dataclasses.replace(models.MODEL_WORKLOADS["gpt2_block"], deploy="trace")
    placed = models.placed(block, "tiny", CPU, torch.float32)
    traced = placed.scripted_function()
    assert isinstance(traced, torch.jit.ScriptModule)
    # Frozen: the weights are constants, no attribute is read.
    assert "prim::GetAttr" not in str(traced.graph)
    (x,) = placed._example_inputs()
    with torch.no_grad():
        torch.testing.assert_close(traced(x), placed.eager_function()(x))


def test_a_timed_model_row_records_host_time_and_elementwise_counts(tmp_path: Path) -> None:
    preset = dataclasses.replace(
        QUICK, sizes=("tiny",), budget=TimingBudget(seconds=0.0, min_reps=2, max_reps=2)
    )
    options = runner.RunOptions(
        preset=preset, devices=[CPU], workloads=["gpt2_block"], modes=["eager", "script", "fuser"]
    )
    with open(os.devnull, "w") as sink:
        result = runner.run_suite(options, Progress(options.row_count(), sink))
    (row,) = result.rows
    assert not row.failed, row.failure
    for name in ("eager", "script", "fuser"):
        mode = row.modes[name]
        assert mode.time_us is not None and mode.host_us == mode.time_us  # CPU
        assert mode.elementwise_kernels is not None
    eager_count = row.modes["eager"].elementwise_kernels
    assert eager_count is not None and eager_count >= 10  # GELU alone has 7 ops
    assert row.modes["script"].elementwise_kernels == eager_count
    fused_count = row.modes["fuser"].elementwise_kernels
    assert fused_count is not None and fused_count < eager_count
    text = render_table(result)
    assert "elementwise" in text and "% of eager" in text and "host us" in text
    assert "gpt2_block" in text and "fuser GB/s" not in text  # no kernel rows, no grid
    write_json(result, tmp_path / "r.json")
    back = read_json(tmp_path / "r.json").rows[0].modes["fuser"]
    assert back.elementwise_kernels == fused_count


# --- the suite end to end --------------------------------------------------------------


def test_quick_smoke_run_matches_eager(tmp_path: Path) -> None:
    # A fresh interpreter, as a user runs it; from tmp_path so that PYTHONPATH decides
    # which fuser is imported, not the current directory.
    done = subprocess.run(
        [sys.executable, "-m", "fuser.bench", "--quick", "--smoke", "--out", str(tmp_path)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads((tmp_path / "results.json").read_text())
    rows = data["rows"]
    assert {row["workload"] for row in rows} == set(WORKLOADS)
    assert all(row["size"] == "tiny" for row in rows)
    for row in rows:
        assert row["status"] == "ok", row["failure"]
        fused = row["modes"]["fuser"]
        assert fused["mismatch"] is None and fused["na_reason"] is None
        assert fused["groups"] >= 1, row["workload"]  # training rows: their forward's
        assert row["interpreted_runs"] == 0, row["workload"]  # every group ran its kernel
        # Peers are reported, not asserted: their accuracy is not this project's to test.
        assert row["modes"]["script"]["mismatch"] is None
    assert f"smoke check: {len(rows)} of {len(rows)} rows passed" in done.stdout
    assert data["metadata"]["torch_version"] == torch.__version__


def test_float32_models_get_tf32_room_on_cuda_only() -> None:
    from fuser.bench.correctness import model_tolerances

    assert model_tolerances(on_cuda=False)[torch.float32] == 1e-4
    before = torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cudnn.allow_tf32 = True
        assert model_tolerances(on_cuda=True)[torch.float32] == 2e-3
        assert model_tolerances(on_cuda=True)[torch.float16] == 1e-2
        torch.backends.cudnn.allow_tf32 = False
        assert model_tolerances(on_cuda=True)[torch.float32] == 1e-4
    finally:
        torch.backends.cudnn.allow_tf32 = before


def test_a_model_result_that_differs_from_eager_as_torchscript_does_is_judged_against_it() -> None:
    want = torch.randn(64)
    folded = want + 0.01 * torch.randn(64)  # TorchScript's frozen result, 1% off
    fused_alike = folded + 1e-7 * torch.randn(64)
    fused_off = folded + 0.01 * torch.randn(64)

    def prepared(name: str, actual: torch.Tensor) -> runner.PreparedMode:
        result = ModeResult(name, mismatch=mismatch(actual, want, torch.float32, model=True))
        return runner.PreparedMode(MODES[name], result, actual=actual)

    script, fused = prepared("script", folded), prepared("fuser", fused_alike)
    assert script.result.mismatch is not None and fused.result.mismatch is not None
    nnc = prepared("nnc", fused_off)
    runner.judge_against_torchscript([script, fused, nnc], torch.float32)
    assert fused.result.mismatch is None
    assert fused.result.eager_difference is not None
    assert "norm-wise relative error" in fused.result.eager_difference
    # Farther from TorchScript's result than the tolerance: still wrong.
    assert nnc.result.mismatch is not None and nnc.result.eager_difference is None
    assert script.result.mismatch is not None  # TorchScript's own difference stays shown

    # Where TorchScript matches eager, nothing is excused.
    script_ok, wrong = prepared("script", want), prepared("fuser", folded)
    runner.judge_against_torchscript([script_ok, wrong], torch.float32)
    assert wrong.result.mismatch is not None and wrong.result.eager_difference is None


def test_results_are_written_after_every_row_and_shown_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A run cut short keeps the rows it finished: run_suite hands each one out.
    options, _ = cli.parse_options(
        [
            "--smoke",
            "--workload",
            "elementwise_chain,gelu_bias",
            "--device",
            "cpu",
            "--mode",
            "fuser",
        ]
    )
    seen: list[list[str]] = []
    runner.run_suite(
        options,
        Progress(options.row_count(), io.StringIO()),
        lambda so_far: seen.append([r.workload for r in so_far.rows]),
    )
    assert seen == [["elementwise_chain"], ["elementwise_chain", "gelu_bias"]]
    argv = ["--workload", "elementwise_chain", "--device", "cpu", "--mode", "fuser"]
    argv += ["--size", "tiny"]
    assert cli.main([*argv, "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    table = printed[: printed.index("wrote ")]
    assert cli.main(["--show", str(tmp_path / cli.JSON_NAME)]) == 0
    shown = capsys.readouterr().out
    assert "elementwise_chain" in shown and shown.strip() == table.strip()
