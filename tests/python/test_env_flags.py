"""Environment flags of DESIGN.md section 4, each in a fresh interpreter (the core
reads them once). FUSER_ENABLE works through the torch.backends entry point, with
no import of fuser in the program."""

import importlib.metadata
import json
import os

import pytest

from helpers import run_python

# Autoload needs fuser installed (`pip install`), which registers its torch.backends
# entry point; a tree only built in place (the device's) has none. The test command sets
# FUSER_TESTS_INSTALLED=1: there these tests run, and fail if the entry point is missing.
INSTALLED = any(e.name == "fuser" for e in importlib.metadata.entry_points(group="torch.backends"))
needs_entry_point = pytest.mark.skipif(
    not INSTALLED and os.environ.get("FUSER_TESTS_INSTALLED") != "1",
    reason="fuser is not installed: no torch.backends entry point to autoload",
)

FUSED_PROGRAM = """
import json, torch
@torch.jit.script
def f(x, y):
    return (x * y + 1).relu().sigmoid()
x, y = torch.randn(32, 32), torch.randn(32, 32)
for _ in range(3):
    out = f(x, y)
g = torch.jit.last_executed_optimized_graph()
fused = sum(1 for n in g.nodes() if n.kind() == "fuser::FusionGroup")
for n in g.nodes():
    for b in n.blocks():
        fused += sum(1 for m in b.nodes() if m.kind() == "fuser::FusionGroup")
ok = torch.allclose(out, (x * y + 1).relu().sigmoid())
print(json.dumps({"fused": fused, "ok": ok}))
"""


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


@needs_entry_point
def test_autoload_enables_without_import():
    result = run_python(FUSED_PROGRAM, {"FUSER_ENABLE": "1"})
    assert result.returncode == 0, result.stderr
    report = last_json(result.stdout)
    assert report == {"fused": 1, "ok": True}


# Makes `fuser._C` fail to import, as a missing or mismatched build does.
BREAK_EXTENSION = """
import sys
class _NoExtension:
    def find_spec(self, name, path=None, target=None):
        if name == "fuser._C":
            raise ImportError("simulated: no build")
sys.meta_path.insert(0, _NoExtension())
"""


@needs_entry_point
def test_torch_loads_the_entry_point_without_importing_fuser():
    code = """
import importlib.metadata, sys, torch
entries = importlib.metadata.entry_points(group="torch.backends")
entry = [e.value for e in entries if e.name == "fuser"]
print(entry, "fuser" in sys.modules, "fuser_autoload" in sys.modules)
"""
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["['fuser_autoload:autoload']", "False", "True"]


@needs_entry_point
def test_a_broken_extension_does_not_break_import_torch():
    program = """
import torch
print(torch.ones(2).sum().item())
try:
    import fuser
except ImportError as err:
    print("IMPORT ERROR", err)
"""
    result = run_python(BREAK_EXTENSION + program, {"FUSER_ENABLE": "1"})
    assert result.returncode == 0, result.stderr
    assert "could not enable at import" in result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "2.0"
    assert lines[1].startswith("IMPORT ERROR fuser's C++ extension did not load")
    assert "pip install --no-build-isolation -e ." in lines[1]


def test_nothing_fused_without_flag():
    result = run_python(FUSED_PROGRAM)
    assert result.returncode == 0, result.stderr
    assert last_json(result.stdout) == {"fused": 0, "ok": True}


def test_kill_switch_wins_over_enable_and_api():
    code = "import fuser\nfuser.enable()\nassert not fuser.is_enabled()\n" + FUSED_PROGRAM
    result = run_python(code, {"FUSER_ENABLE": "1", "FUSER_DISABLE": "1"})
    assert result.returncode == 0, result.stderr
    assert last_json(result.stdout) == {"fused": 0, "ok": True}


def test_bad_values_warn_once_and_fall_back():
    code = """
import warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import torch
    import fuser
    print(fuser.get_arg_limit())
for w in caught:
    print("WARN", w.message)
"""
    env = {
        "FUSER_ENABLE": "1",
        "FUSER_ARG_LIMIT": "lots",
        "FUSER_DEVICES": "tpu",
        "FUSER_SHAPE_KERNELS": "-1",
        "FUSER_TILE_SIDE": "48",
        "FUSER_TILE_GROUP": "-1",
    }
    result = run_python(code, env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "128" in lines
    warns = [line for line in lines if line.startswith("WARN")]
    assert sum("FUSER_ARG_LIMIT" in w for w in warns) == 1
    assert sum("FUSER_DEVICES" in w for w in warns) == 1
    assert any("cpu, cuda" in w for w in warns)
    assert any("FUSER_SHAPE_KERNELS" in w and "0 to 64" in w for w in warns)
    assert any("FUSER_TILE_SIDE" in w and "0, 32, 64" in w for w in warns)
    assert any("FUSER_TILE_GROUP" in w and "0 to 1024" in w for w in warns)


@needs_entry_point
def test_bad_enable_value_does_not_break_import_torch():
    result = run_python("import torch; print('imported')", {"FUSER_ENABLE": "maybe"})
    assert result.returncode == 0, result.stderr
    assert "imported" in result.stdout
    assert "FUSER_ENABLE" in result.stderr


def test_arg_limit_from_environment():
    result = run_python("import fuser; print(fuser.get_arg_limit())", {"FUSER_ARG_LIMIT": "16"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "16"


@needs_entry_point
def test_devices_flag_excludes_cpu():
    result = run_python(FUSED_PROGRAM, {"FUSER_ENABLE": "1", "FUSER_DEVICES": "cuda"})
    assert result.returncode == 0, result.stderr
    assert last_json(result.stdout) == {"fused": 0, "ok": True}


@needs_entry_point
def test_dump_kernels_prints_source():
    result = run_python(FUSED_PROGRAM, {"FUSER_ENABLE": "1", "FUSER_DUMP": "kernels,graph"})
    assert result.returncode == 0, result.stderr
    assert "fuser_kernel" in result.stderr
    assert "fuser::FusionGroup" in result.stderr


@needs_entry_point
def test_dump_interpreted_prints_the_group_and_the_inputs_it_was_given():
    env = {"FUSER_ENABLE": "1", "FUSER_EXECUTOR": "interpreter"}
    quiet = run_python(FUSED_PROGRAM, env)
    assert quiet.returncode == 0, quiet.stderr
    assert "run interpreted" not in quiet.stderr
    result = run_python(FUSED_PROGRAM, {**env, "FUSER_DUMP": "interpreted"})
    assert result.returncode == 0, result.stderr
    assert last_json(result.stdout) == {"fused": 1, "ok": True}
    lines = result.stderr.splitlines()
    calls = [line for line in lines if "[fuser] group run interpreted" in line]
    # Calls 2 and 3 of the program run the optimized graph.
    assert calls == [
        f"[fuser] group run interpreted (call {n}): FUSER_EXECUTOR=interpreter" for n in (1, 2)
    ]
    assert result.stderr.count("aten::sigmoid") == 1  # the graph, with the first call alone
    assert lines.count("  input 0: Float cpu sizes [32, 32] strides [32, 1] offset 0") == 2


EMPTY_PROGRAM = """
import torch
@torch.jit.script
def f(x, y):
    return (x * y + 1).relu().sigmoid()
for _ in range(3):
    out = f(torch.randn(0, 32), torch.randn(0, 32))
print(tuple(out.shape))
"""


@needs_entry_point
def test_dump_interpreted_says_why_the_kernel_did_not_run():
    result = run_python(EMPTY_PROGRAM, {"FUSER_ENABLE": "1", "FUSER_DUMP": "interpreted"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "(0, 32)"
    assert "[fuser] group run interpreted (call 1): a zero-size result" in result.stderr
