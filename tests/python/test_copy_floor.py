"""tools/copy_floor.py: a copy of a benchmark row's own bytes, the floor at its size."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest
import torch

from fuser.bench.timing import TimingBudget

TOOL = Path(__file__).resolve().parents[2] / "tools" / "copy_floor.py"


def load_tool():
    spec = importlib.util.spec_from_file_location("copy_floor", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


# softmax at tiny: x (64, 256) in, its softmax out; the copy's source holds half of
# those bytes, and 4 x 1 MiB of cache (timing.CACHE_MULTIPLE) takes that many sources.
@pytest.mark.parametrize("dtype, sources", [("float32", 64), ("bfloat16", 128)])
def test_the_copy_moves_the_rows_bytes_and_the_floor_is_them_at_the_large_bandwidth(
    dtype: str, sources: int
) -> None:
    tool = load_tool()
    budget = TimingBudget(seconds=0.01, min_reps=3, max_reps=20)
    f = tool.copy_floor(f"softmax:tiny:{dtype}", torch.device("cpu"), 1 << 20, 10.0, budget)
    assert f.moved == 2 * 64 * 256 * getattr(torch, dtype).itemsize
    assert f.copied == f.moved
    assert math.isclose(f.floor_us, f.moved / (10.0 * 1e3))
    assert f.sources == sources
    assert f.copy.reps >= 3 and f.copy.median_us > 0
    assert math.isnan(f.device_us)  # the profiler's device times are CUDA's


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_the_profiler_gives_the_copys_own_device_time() -> None:
    tool = load_tool()
    budget = TimingBudget(seconds=0.05, min_reps=5, max_reps=50)
    f = tool.copy_floor("softmax:small:float16", torch.device("cuda"), 1 << 20, 1000.0, budget)
    assert f.copied == f.moved
    assert f.device_us > 0  # nan where the profiler saw no copy for each call
