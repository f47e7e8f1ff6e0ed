"""Kernel variants timed at first run (runtime/variant_timing.h): a row kernel's first
call of a shape class times its candidates (CUDA lanes per row, CPU rows per task) on
its own arguments, keeps the fastest, writes the choice to the disk cache, and a later
process reads it and times nothing. FUSER_AUTOTUNE=0 takes the heuristic's variant,
FUSER_FORCE_VARIANT=i variant i; every variant gives eager's results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

import fuser
from helpers import devices, eager_from_source, run_optimized, run_python, script_from_source

# The first test bounds the timing's wall time; the fixture clears the shared disk cache's
# choices: neither may run beside another test worker.
pytestmark = pytest.mark.timing

LAYER_NORM = """
def f(x, w, b):
    return torch.nn.functional.gelu(torch.layer_norm(x * 2.0, [512], w, b, 1e-5))
"""


def inputs(rows: int, device: str) -> tuple[torch.Tensor, ...]:
    return (
        torch.randn(rows, 512, device=device),
        torch.randn(512, device=device),
        torch.randn(512, device=device),
    )


def run_layer_norm(args: tuple[torch.Tensor, ...]) -> None:
    fn = script_from_source(LAYER_NORM)
    with fuser.enabled(True):
        got = run_optimized(fn, *args)
    torch.testing.assert_close(got, eager_from_source(LAYER_NORM)(*args))


@pytest.mark.parametrize("device", devices())
def test_first_call_times_the_variants_and_keeps_the_fastest(
    device: str, variant_flags: None
) -> None:
    run_layer_norm(inputs(4096, device))
    stats = fuser.stats()
    assert stats["variants_timed"] == 1 and stats["row_launches"] >= 2, stats
    assert stats["cuda_cross_compile_failures"] == 0, stats  # every lane variant's CUDA form
    [record] = fuser._C.variant_log()
    assert 0 < record["timing_ms"] < 200, record
    if record["rounds"] == 0:
        # A machine so loaded that one round would end past the limit (a host running 15
        # test workers took 12-30 ms a launch): the heuristic's, untimed, only then.
        assert record["chosen"] == 0 and record["us"] == [], record
        assert record["timing_ms"] > 75, record
        return
    assert len(record["names"]) >= 2 and len(record["us"]) == len(record["names"])
    assert all(us > 0 for us in record["us"])
    # The chosen one: of the candidates 1% faster than the heuristic's (median) that ran
    # faster than it in 3 of 5 rounds, the fastest; the heuristic's where none is.
    us, wins, rounds = record["us"], record["wins"], record["rounds"]
    beats = [i for i in range(1, len(us)) if us[i] < 0.99 * us[0] and wins[i] >= 0.6 * rounds]
    assert record["chosen"] == (min(beats, key=lambda i: us[i]) if beats else 0), record
    # The same shape again times nothing, nor does a batch of the same class (rows up to
    # the next power of two); a new shape class is timed once more.
    run_layer_norm(inputs(4096, device))
    run_layer_norm(inputs(3000, device))
    assert fuser.stats()["variants_timed"] == 1
    run_layer_norm(inputs(8192, device))
    assert fuser.stats()["variants_timed"] == 2


@pytest.mark.parametrize("device", devices())
def test_small_problems_time_no_cuda_variants(device: str, variant_flags: None) -> None:
    """On CUDA each candidate is a kernel to compile: a problem of fewer than 2**21
    elements builds the heuristic's alone (on CPU the candidates share one kernel and are
    timed at every size)."""
    run_layer_norm(inputs(1000, device))
    stats = fuser.stats()
    assert stats["row_launches"] >= 2, stats
    assert stats["variants_timed"] == (0 if device == "cuda" else 1), stats


@pytest.mark.parametrize("device", devices())
def test_every_variant_gives_eager_results(device: str, variant_flags: None) -> None:
    for forced in range(5):  # past the last variant: the last one
        fuser._C._set_variant_choice(True, forced)
        fuser._C._forget_variant_choices()
        for rows in [4096, 37, 1]:
            run_layer_norm(inputs(rows, device))
    stats = fuser.stats()
    assert stats["variants_timed"] == 0 and stats["row_launches"] >= 24, stats
    assert fuser._C.variant_log() == []


@pytest.mark.parametrize("device", devices())
def test_autotune_off_takes_the_heuristic_without_timing(device: str, variant_flags: None) -> None:
    fuser._C._set_variant_choice(False, -1)
    run_layer_norm(inputs(4096, device))
    stats = fuser.stats()
    assert stats["variants_timed"] == 0 and stats["variant_disk_hits"] == 0, stats
    assert stats["row_launches"] >= 2 and fuser._C.variant_log() == []


PROGRAM = """
import json, torch, fuser
fuser.enable()
src = '''
def f(x, w, b):
    return torch.layer_norm(x + 1.0, [512], w, b, 1e-5)
'''
f = torch.jit.CompilationUnit(src).f
x, w, b = torch.randn(2048, 512), torch.randn(512), torch.randn(512)
for _ in range(3):
    out = f(x, w, b)
torch.testing.assert_close(out, torch.layer_norm(x + 1.0, [512], w, b, 1e-5))
s = fuser.stats()
out = {k: s[k] for k in ("variants_timed", "variant_disk_hits", "row_launches")}
out["rounds"] = [r["rounds"] for r in fuser._C.variant_log()]
print(json.dumps(out))
"""


def run_program(cache: Path, **env: str) -> dict[str, Any]:
    result = run_python(PROGRAM, {"FUSER_CACHE_DIR": str(cache), **env})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_second_process_reads_the_choice_from_disk(tmp_path: Path) -> None:
    first = run_program(tmp_path)
    assert first["variants_timed"] == 1 and first["variant_disk_hits"] == 0, first
    if first["rounds"][0] < 3:
        # A machine too loaded for kFullRounds within the limit keeps its choice in
        # memory only: the next process times again.
        assert not (tmp_path / "variants").exists() or not any((tmp_path / "variants").iterdir())
        return
    entries = list((tmp_path / "variants").iterdir())
    assert len(entries) == 1
    assert b"chosen=" in entries[0].read_bytes() and b"rows_per_task=" in entries[0].read_bytes()
    second = run_program(tmp_path)
    assert second["variants_timed"] == 0 and second["variant_disk_hits"] == 1, second
    assert second["row_launches"] >= 2


def test_flags_from_the_environment(tmp_path: Path) -> None:
    off = run_program(tmp_path, FUSER_AUTOTUNE="0")
    assert off["variants_timed"] == 0 and off["variant_disk_hits"] == 0, off
    forced = run_program(tmp_path, FUSER_FORCE_VARIANT="1")
    assert forced["variants_timed"] == 0 and forced["row_launches"] >= 2, forced
    assert not (tmp_path / "variants").exists() or not any((tmp_path / "variants").iterdir())
    code = "import fuser._C as c; print(c.config_warnings())"
    result = run_python(code, {"FUSER_FORCE_VARIANT": "x"})
    assert "FUSER_FORCE_VARIANT" in result.stdout


CHANNEL_NORM = """
def f(x, w):
    u = x.mean(1, keepdim=True)
    d = x - u
    return d / torch.sqrt((d * d).mean(1, keepdim=True) + 1e-6) * w
"""


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA's column kernel variants")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_cuda_columns_time_three_vector_widths(dtype: torch.dtype, variant_flags: None) -> None:
    """A CUDA column kernel (statistics over the channels of NCHW, its whole output
    beside them) is timed with 16, 8 and 4 bytes of rows per thread: in float16 the
    16-byte vector's eight rows spill registers (H200, [32, 256, 64, 64]: 112.8 us,
    88.3 at 8 bytes); where the device takes them, rows copied into shared memory (4
    bytes a thread) replace the narrowest. Every variant, forced, gives eager's results."""
    x = torch.randn(16, 64, 64, 64, device="cuda").to(dtype)
    w = torch.randn(1, 64, 1, 1, device="cuda").to(dtype)
    fn = script_from_source(CHANNEL_NORM)
    want = eager_from_source(CHANNEL_NORM)(x, w)
    tolerance = {"rtol": 1e-2, "atol": 1e-2} if dtype == torch.float16 else {}
    with fuser.enabled(True):
        torch.testing.assert_close(run_optimized(fn, x, w), want, **tolerance)
    [record] = fuser._C.variant_log()
    widest = 16 // dtype.itemsize
    names = [f"columns vector={widest // k}" for k in (1, 2, 4)]
    # 64 channels of one copied input: 128 bytes each (a warp's 4 bytes a thread).
    blocks = fuser._C._columns_in_shared_blocks(x.device.index or 0, 64 * 128, False)
    if blocks:
        suffix = "" if blocks == 2 else f" blocks={blocks}"
        names[2] = f"columns vector={4 // dtype.itemsize} in shared{suffix}"
    assert record["names"] == names, record
    for forced in range(len(names)):
        fuser._C._set_variant_choice(True, forced)
        fuser._C._forget_variant_choices()
        fn = script_from_source(CHANNEL_NORM)
        with fuser.enabled(True):
            torch.testing.assert_close(run_optimized(fn, x, w), want, **tolerance)
