"""tools/copy_floor.py: a copy of a benchmark row's own bytes, the floor at its size."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import torch

from fuser.bench.timing import TimingBudget

TOOL = Path(__file__).resolve().parents[2] / "tools" / "copy_floor.py"


def load_tool():
    spec = importlib.util.spec_from_file_location("copy_floor", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_the_copy_moves_the_rows_bytes_and_the_floor_is_them_at_the_large_bandwidth() -> None:
    tool = load_tool()
    budget = TimingBudget(seconds=0.01, min_reps=3, max_reps=20)
    # softmax at tiny: x (64, 256) float32 in, its softmax out.
    f = tool.copy_floor("softmax:tiny:float32", torch.device("cpu"), 1 << 20, 10.0, budget)
    assert f.moved == 2 * 64 * 256 * 4
    assert f.copied == f.moved
    assert math.isclose(f.floor_us, f.moved / 10e3)
    assert f.copy.reps >= 3 and f.copy.median_us > 0
    assert math.isnan(f.kernel_us)  # no profiler kernels on the CPU


def test_half_precision_rows_copy_in_their_element_size() -> None:
    tool = load_tool()
    budget = TimingBudget(seconds=0.01, min_reps=3, max_reps=5)
    f = tool.copy_floor("softmax:tiny:bfloat16", torch.device("cpu"), 1 << 20, 10.0, budget)
    assert f.moved == 2 * 64 * 256 * 2
    assert f.copied == f.moved
