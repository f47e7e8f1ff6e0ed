"""Tests of fuser/report/: each section on small graphs with known answers, the drawing
(its dot text parses), and the command line on a saved model in a fresh process."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from conftest import parse

import fuser
from fuser import _C
from fuser.report import dot, group_timing, groups, inputs, preview, refusals, totals
from fuser.report.reason_classes import reason_class

F32_4x5 = 4 * 5 * 4  # bytes of one $T value

# x*y -> relu -> sigmoid fuse; mm is not fusible; tanh after it is alone.
CHAIN = """
graph(%x : $T, %y : $T, %m : $M):
  %a : $T = aten::mul(%x, %y)
  %b : $T = aten::relu(%a)
  %c : $T = aten::sigmoid(%b)
  %d : $T = aten::mm(%c, %m)
  %e : $T = aten::tanh(%d)
  return (%e)"""


def captured(ir: str) -> Any:
    """The typed copy the pipeline leaves for the report when it fuses `ir`."""
    _C._set_report_capture(True)
    try:
        _C.fuse_graph(parse(ir))
        (graph,) = _C._take_captured_graphs()
    finally:
        _C._set_report_capture(False)
    return graph


def rows_by_kind(graph: Any) -> dict[str, Any]:
    return {row.kind: row for row in preview.support_preview(graph)}


def test_capture_is_off_outside_a_report() -> None:
    _C.fuse_graph(parse(CHAIN))
    assert _C._take_captured_graphs() == []


def test_support_preview_counts_and_classes() -> None:
    rows = rows_by_kind(captured(CHAIN))
    assert set(rows) == {"aten::mul", "aten::relu", "aten::sigmoid", "aten::mm", "aten::tanh"}
    assert rows["aten::mul"].input_dtypes == ("f32", "f32")
    assert (rows["aten::mul"].count, rows["aten::mul"].fused, rows["aten::mul"].fusible) == (
        1,
        1,
        True,
    )
    assert rows["aten::mm"].fusible is False
    assert rows["aten::mm"].reason_classes == {"unsupported operator": 1}
    assert rows["aten::tanh"].reason_classes == {"no fusible neighbour": 1}


def test_group_bytes_and_estimates() -> None:
    (row,) = groups.group_rows(captured(CHAIN))
    assert row.ops == ["aten::mul", "aten::relu", "aten::sigmoid"]
    assert row.device == "cpu"
    assert row.inputs == ["f32[4, 5]", "f32[4, 5]"] and row.outputs == ["f32[4, 5]"]
    assert (row.bytes_read, row.bytes_written) == (2 * F32_4x5, F32_4x5)
    # mul reads 2 and writes 1, relu and sigmoid read 1 and write 1 each
    assert row.unfused_bytes == 7 * F32_4x5
    assert row.unfused_kernels == 3
    assert row.est_speedup == pytest.approx(7 / 3)
    groups.add_estimates([row], {"cpu": 2.0})
    assert row.est_fused_us == pytest.approx(3 * F32_4x5 / 2e3)
    assert row.est_unfused_us == pytest.approx(7 * F32_4x5 / 2e3)


def test_why_not_fused_groups_reasons_with_examples() -> None:
    rows = {r.reason_class: r for r in refusals.refusals(captured(CHAIN))}
    assert set(rows) == {"unsupported operator", "no fusible neighbour"}
    mm = rows["unsupported operator"]
    assert (mm.count, mm.by_op) == (1, {"aten::mm": 1})
    assert mm.reason == "operator not in the fusible table: aten::mm"
    assert "= aten::mm(" in mm.example
    assert mm.example.endswith(": operator not in the fusible table: aten::mm")
    assert rows["no fusible neighbour"].by_op == {"aten::tanh": 1}


def test_equal_reasons_of_different_nodes_count_together() -> None:
    graph = captured("""
graph(%x : $T, %m : $M):
  %a : $T = aten::mm(%x, %m)
  %b : $T = aten::mm(%a, %m)
  %c : $T = aten::mm(%b, %m)
  return (%c)""")
    (row,) = refusals.refusals(graph)
    assert (row.count, row.by_op) == (3, {"aten::mm": 3})
    assert refusals.refusals_by_op([row]) == {"aten::mm": {"unsupported operator": 3}}


def test_totals_count_nodes_and_kernels() -> None:
    t = totals.totals(captured(CHAIN), measured_fuser_launches=1)
    assert (t.ops_in_groups, t.ops_outside, t.groups) == (3, 2, 1)
    assert (t.kernels_unfused, t.kernels_fused) == (5, 3)


def test_min_group_size_dissolves_with_a_reason() -> None:
    _C.set_min_group_size(4)
    graph = captured(CHAIN)
    assert groups.group_rows(graph) == []
    rows = {r.reason: r for r in refusals.refusals(graph)}
    small = rows["its group of 3 nodes was below the minimum group size 4 (FUSER_MIN_GROUP_SIZE)"]
    assert small.reason_class == "group too small"
    assert small.by_op == {"aten::mul": 1, "aten::relu": 1, "aten::sigmoid": 1}
    alone = rows["its group of 1 node was below the minimum group size 4 (FUSER_MIN_GROUP_SIZE)"]
    assert alone.by_op == {"aten::tanh": 1}


def test_reason_classes_table() -> None:
    assert reason_class("operator not in the fusible table: aten::mm") == "unsupported operator"
    assert reason_class("%x has no profiled dtype") == "no profile"
    assert reason_class("would exceed argument limit 4 (5 arguments)") == "argument limit"
    assert reason_class("something new") == "other"


def fresh(source: str) -> Any:
    from helpers import script_from_source

    return script_from_source(source)


def test_report_of_a_scripted_function() -> None:
    f = fresh("""
def f(x, y):
    return (x * y).relu().sigmoid()
""")
    x, y = torch.randn(64, 32), torch.randn(64, 32)
    with torch.no_grad():
        report = fuser.report(f, x, y, bandwidth_gbps={"cpu": 10.0}, measure=False)
    (graph,) = report.graphs
    assert graph.phase == "forward"
    (row,) = graph.groups
    nbytes = 64 * 32 * 4
    assert (row.bytes_read, row.bytes_written, row.unfused_bytes) == (
        2 * nbytes,
        nbytes,
        7 * nbytes,
    )
    assert row.est_fused_us == pytest.approx(3 * nbytes / 10e3)
    assert graph.totals.measured_fuser_launches == 1
    assert (graph.totals.kernels_unfused, graph.totals.kernels_fused) == (3, 1)
    assert report.settings.arg_limit == fuser.get_arg_limit()
    assert report.settings.min_group_size == 2
    assert not fuser.is_enabled()  # restored
    text = str(report)
    for section in ("support preview", "groups", "why not fused", "totals", "settings:"):
        assert section in text
    assert json.loads(json.dumps(report.to_dict()))["graphs"][0]["groups"][0]["est_speedup"] == (
        pytest.approx(7 / 3)
    )


def test_report_settings_apply_to_its_run_only() -> None:
    f = fresh("""
def f(x, y):
    return (x * y).relu().sigmoid()
""")
    x = torch.randn(8, 8)
    with torch.no_grad():
        report = fuser.report(f, x, x, min_group_size=4, max_groups=3, arg_limit=16, measure=False)
    assert (report.settings.min_group_size, report.settings.max_groups) == (4, 3)
    assert report.settings.arg_limit == 16
    assert report.graphs[0].groups == []  # three nodes < 4
    assert _C.get_min_group_size() == 2 and _C.get_max_groups() == 0
    assert fuser.get_arg_limit() == 128
    with pytest.raises(ValueError, match="FUSER_DEVICES"):
        fuser.report(f, x, x, devices=["cuda"], measure=False)


def test_report_of_loops_and_ifs_counts_each_group_once() -> None:
    f = fresh("""
def f(x, y, n: int):
    for _ in range(n):
        x = (x * y).relu()
    if n > 2:
        x = x.sigmoid().tanh()
    return x
""")
    x, y = torch.randn(4, 5), torch.randn(4, 5)
    with torch.no_grad():
        report = fuser.report(f, x, y, 3, measure=False)
    (graph,) = report.graphs
    ops = [tuple(g.ops) for g in graph.groups]
    assert ("aten::sigmoid", "aten::tanh") in ops
    assert all(set(o) <= {"aten::mul", "aten::relu"} for o in ops if "aten::tanh" not in o)
    assert graph.totals.ops_in_groups == sum(len(o) for o in ops)
    assert graph.totals.ops_outside == 0
    text = dot.to_dot(graph.graph)
    check_dot(text)
    assert "prim::Loop" in text and "prim::If" in text


def test_report_of_a_training_graph_lists_forward_and_backward() -> None:
    f = fresh("""
def f(x, y):
    return (x * y).sigmoid() * y
""")
    x = torch.randn(16, 16, requires_grad=True)
    y = torch.randn(16, 16)
    report = fuser.report(f, x, y, measure=False)
    phases = [g.phase for g in report.graphs]
    assert phases[0] == "forward" and "backward" in phases
    assert "=== backward graph ===" in str(report)


def test_measured_group_time() -> None:
    f = fresh("""
def f(x, y):
    return (x * y).relu().sigmoid()
""")
    x = torch.randn(256, 256)
    with torch.no_grad():
        report = fuser.report(f, x, x, bandwidth_gbps={"cpu": 10.0})
    (row,) = report.graphs[0].groups
    assert row.measured_us is not None and row.measured_us > 0
    assert row.measured_unfused_us is not None and row.measured_unfused_us > 0


def _optimized_group(source: str, *args: torch.Tensor) -> tuple[Any, Any]:
    """(the fused group, the function that owns its graph: keep it alive)."""
    f = fresh(source)
    with torch.no_grad(), fuser.enabled(True):
        f(*args)
        f(*args)
    graph = torch.jit.last_executed_optimized_graph()
    (group,) = graph.findAllNodes("fuser::FusionGroup")
    return group, (f, graph)


def test_group_timing_times_the_kernel_and_the_unfused_ops_it_names() -> None:
    # Optimized, the executor would inline the wrapped group back into ATen ops: the
    # fused timing must launch the group's kernel on every call, the unfused one never.
    group, _owner = _optimized_group(
        "def f(x, y):\n    return torch.nn.functional.gelu(x + y) * 2.0\n",
        torch.randn(64, 128),
        torch.randn(128),
    )
    wrapped = group_timing._function_around(group)
    args = [inputs.for_value(v) for v in group.g("Subgraph").inputs()]
    with torch.jit.optimized_execution(False):
        for _ in range(4):
            before = group_timing._launches()
            (fused,) = wrapped(*args)
            assert group_timing._launches() == before + 1
    expected = torch.nn.functional.gelu(args[0] + args[1]) * 2.0
    torch.testing.assert_close(fused, expected)
    before = group_timing._launches()
    times = group_timing.time_group(group)
    assert times is not None and min(times) > 0
    # The fused calls launched; the unfused calls add none (time_group checks that).
    assert group_timing._launches() > before


def test_group_timing_runs_a_broadcasting_chunk_unfused() -> None:
    # prim::BroadcastingChunk exists only inside groups; unfused it is broadcast_tensors
    # and one ConstantChunk per input, with the same values.
    b, h = 8, 16
    group, _owner = _optimized_group(
        """
def f(a, b):
    i, j = (a + b).chunk(2, 1)
    return torch.sigmoid(i) * torch.tanh(j)
""",
        torch.randn(b, 2 * h),
        torch.randn(2 * h),
    )
    assert group.g("Subgraph").findNode("prim::BroadcastingChunk") is not None
    args = [inputs.for_value(v) for v in group.g("Subgraph").inputs()]
    unfused = torch._C._create_function_from_graph("unfused", group_timing._unfused_graph(group))
    wrapped = group_timing._function_around(group)
    with torch.jit.optimized_execution(False), fuser.enabled(False):
        (plain,) = unfused(*args)
    with torch.jit.optimized_execution(False):
        (fused,) = wrapped(*args)
    torch.testing.assert_close(fused, plain)
    assert group_timing.time_group(group) is not None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_report_of_a_cuda_graph() -> None:
    f = fresh("""
def f(x, y):
    return (x * y).relu().sigmoid()
""")
    x = torch.randn(64, 32, device="cuda")
    with torch.no_grad():
        report = fuser.report(f, x, x, measure=False)
    (row,) = report.graphs[0].groups
    assert row.device is not None and row.device.startswith("cuda")
    assert (row.bytes_read, row.bytes_written) == (2 * 64 * 32 * 4, 64 * 32 * 4)


# --- the drawing -------------------------------------------------------------------

_STATEMENT = re.compile(
    r"^(?:(?P<edge>\w+ -> \w+)|(?P<node>\w+)) \[(?P<attrs>.*)\];$"
    r"|^subgraph cluster_\w+ \{$|^\}$|^(?:label|node|edge|style|color)\b.*;$|^digraph \w+ \{$"
)


def check_dot(text: str) -> None:
    """A small structural parse of the dot we write: one statement per line, balanced
    braces, every edge between declared nodes; and graphviz's own parse where `dot` is
    installed."""
    depth, declared, edges = 0, set(), []
    for line in (raw.strip() for raw in text.splitlines()):
        if not line:
            continue
        match = _STATEMENT.match(line)
        assert match, f"not a statement we write: {line!r}"
        depth += line.count("{") - line.count("}") if not match.group("attrs") else 0
        assert depth >= 0
        if match.group("node"):
            declared.add(match.group("node"))
        if match.group("edge"):
            edges.append(match.group("edge").split(" -> "))
    assert depth == 0, "unbalanced braces"
    for a, b in edges:
        assert a in declared and b in declared, (a, b)
    if shutil.which("dot"):
        subprocess.run(["dot", "-Tcanon"], input=text, text=True, check=True, capture_output=True)


def test_dot_collapses_groups_and_labels_edges() -> None:
    text = dot.to_dot(captured(CHAIN))
    check_dot(text)
    assert text.count("group #") == 1
    assert '"group #0: 3 ops\\nmul, relu, sigmoid"' in text
    assert '"mm\\n(unsupported operator)"' in text
    assert 'label="f32[4, 5]"' in text
    assert dot.REASON_COLOURS["unsupported operator"] in text


def test_dot_expanded_draws_each_fused_node_in_a_cluster() -> None:
    text = dot.to_dot(captured(CHAIN), collapse=False)
    check_dot(text)
    assert "subgraph cluster_group_0 {" in text
    for name in ("mul", "relu", "sigmoid"):
        assert f'label="{name}"' in text
    # x, y -> mul; mul -> relu -> sigmoid; sigmoid -> mm; m -> mm; mm -> tanh; tanh -> out
    assert text.count(" -> ") == 8


def test_dot_structural_check_rejects_broken_text() -> None:
    with pytest.raises(AssertionError):
        check_dot('digraph fuser {\n  n1 -> n2 [label="x"];\n}\n')
    with pytest.raises(AssertionError):
        check_dot('digraph fuser {\n  n1 [label="a"];\n')


# --- the command line, in a fresh process ----------------------------------------------


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return torch.sigmoid(y * 2.0 + 1.0) * y


@pytest.fixture(scope="module")
def saved_model() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "block.pt")
        torch.jit.save(torch.jit.script(Block().eval()), path)
        yield path


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FUSER_")}
    env["FUSER_CACHE_DIR"] = os.environ.get("FUSER_CACHE_DIR", "/tmp/fuser-test-cache")
    return subprocess.run(
        [sys.executable, "-m", "fuser.report", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_cli_json_on_a_saved_model(saved_model: str) -> None:
    out = run_cli(saved_model, "--input", "float32[2,3,8,8]", "--json", "--no-measure")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    (graph,) = data["graphs"]
    (group,) = graph["groups"]
    assert group["ops"] == ["aten::mul", "aten::add", "aten::sigmoid", "aten::mul"]
    nbytes = 2 * 4 * 8 * 8 * 4
    assert (group["bytes_read"], group["bytes_written"]) == (nbytes, nbytes)
    conv = [
        r
        for r in graph["refusals"]
        if "aten::_convolution" in r["by_op"] or "aten::conv2d" in r["by_op"]
    ]
    assert conv and conv[0]["reason_class"] == "unsupported operator"
    assert graph["totals"]["groups"] == 1


def test_cli_text_and_drawings(saved_model: str) -> None:
    with tempfile.TemporaryDirectory() as directory:
        dot_path = os.path.join(directory, "g.dot")
        png_path = os.path.join(directory, "g.png")
        out = run_cli(
            saved_model,
            "--input",
            "float32[2,3,8,8]",
            "--dot",
            dot_path,
            "--png",
            png_path,
            "--no-measure",
        )
        assert "-- why not fused --" in out.stdout
        with open(dot_path) as f:
            check_dot(f.read())
        if shutil.which("dot") is None:
            assert out.returncode == 1
            assert "graphviz's `dot` is not installed" in out.stderr
            pytest.skip("graphviz's dot is not installed: PNG output not checked")
        assert out.returncode == 0, out.stderr
        with open(png_path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_cli_rejects_a_bad_input_spec(saved_model: str) -> None:
    out = run_cli(saved_model, "--input", "float32(2,3)")
    assert out.returncode == 2
    assert "input spec 'float32(2,3)' is not understood" in out.stderr


def test_input_specs() -> None:
    assert inputs.parse_spec("float32[32,3,224,224]") == (torch.float32, [32, 3, 224, 224], "cpu")
    assert inputs.parse_spec("int64[8]@cuda") == (torch.int64, [8], "cuda")
    assert inputs.parse_spec("bool[]") == (torch.bool, [], "cpu")
    with pytest.raises(ValueError):
        inputs.parse_spec("floaty[2]")


def test_report_of_a_frozen_convolution_with_its_bias_epilogue() -> None:
    # Freezing folds the batch norm into the convolution's bias, which the fuser splits
    # off into the ReLU's group; the captured graph must be valid (every value defined
    # before its uses) for the report to copy it.
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1, bias=False),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
    ).eval()
    frozen = torch.jit.freeze(torch.jit.script(model))
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad(), fuser.enabled(True):
        report = fuser.report(frozen, x, measure=False)
        expected = model(x)
        torch.testing.assert_close(frozen(x), expected)
    (row,) = report.graphs[0].groups
    assert row.ops == ["aten::add", "aten::relu"]
