"""--quick, --full and --smoke: which sizes run, how long each measurement may take, and
which modes run by default.

--quick is what the README runs: medium sizes only and a 0.2 s budget per measurement,
so the whole suite, warm-up and compilation included, stays under 3 minutes on a 2-core
CPU machine. --smoke checks correctness only, on tiny sizes, and leaves torch.compile out
by default: compiling eight workloads with inductor takes over a minute on 2 cores.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fuser.bench.modes import MODES
from fuser.bench.timing import TimingBudget

ALL_MODES = tuple(MODES)
SLOW_TO_BUILD_MODES = ("compile",)


@dataclass(frozen=True)
class Preset:
    name: str
    sizes: tuple[str, ...]
    timed: bool
    # >= 3: the profiling executor profiles on call 1 and optimizes on call 2.
    warmup_calls: int
    budget: TimingBudget
    default_modes: tuple[str, ...]


QUICK = Preset(
    name="quick",
    sizes=("medium",),
    timed=True,
    warmup_calls=5,
    budget=TimingBudget(seconds=0.2, min_reps=5, max_reps=2000),
    default_modes=ALL_MODES,
)
FULL = Preset(
    name="full",
    sizes=("small", "medium", "large"),
    timed=True,
    warmup_calls=10,
    budget=TimingBudget(seconds=1.0, min_reps=20, max_reps=100_000),
    default_modes=ALL_MODES,
)
SMOKE = Preset(
    name="smoke",
    sizes=("tiny",),
    timed=False,
    warmup_calls=3,
    budget=TimingBudget(seconds=0.0, min_reps=0, max_reps=0),
    default_modes=tuple(m for m in ALL_MODES if m not in SLOW_TO_BUILD_MODES),
)
PRESETS = {p.name: p for p in (QUICK, FULL, SMOKE)}

# The copy-bandwidth yardstick is measured once per device, outside any preset's budget.
COPY_BUDGET = TimingBudget(seconds=0.5, min_reps=5, max_reps=200)


def dtypes_for(device: torch.device) -> tuple[torch.dtype, ...]:
    """float32 everywhere; the half types only on CUDA, where they are fast."""
    if device.type == "cuda":
        return (torch.float32, torch.float16, torch.bfloat16)
    return (torch.float32,)
