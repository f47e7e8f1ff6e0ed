"""Many seeds of tests/python/test_random_reductions.py's random programs against eager
(the test itself runs one seed): prints each failing program with its input shapes and
strides, then a count.

    PYTHONPATH=.:tests/python python tools/fuzz_reductions.py --device cuda --seeds 0:20
"""

from __future__ import annotations

import random

import torch
from fuzz_seeds import parse_arguments, report_seeds, seed_range
from test_output_layout import random_tensor
from test_random_reductions import SHAPES, difference_from_eager, random_program

import fuser


def check(source: str, args: list[torch.Tensor], later: list[torch.Tensor]) -> str | None:
    """The test's difference from eager, or the error the program raised."""
    try:
        return difference_from_eager(source, args, later)
    except Exception as e:  # noqa: BLE001 - every failure is reported
        return str(e)[:500]


def main() -> None:
    a = parse_arguments(__doc__, "programs", 40)

    def run_seed(seed: int) -> tuple[int, list[str]]:
        rng = random.Random(seed)
        formed, failures = 0, []
        for _ in range(a.programs):
            shape = rng.choice(SHAPES)
            source, num_inputs = random_program(rng, len(shape))
            args = [random_tensor(rng, shape, a.device) for _ in range(num_inputs)]
            # A later call in other layouts (as a gradient may arrive): checked too.
            later = [random_tensor(rng, shape, a.device) for _ in range(num_inputs)]
            fuser.reset_stats()
            why = check(source, args, later)
            formed += fuser.stats()["groups_formed"]
            if why is not None:
                strides = [tuple(t.stride()) for t in args + later]
                failures.append(f"shape {shape} strides {strides}\n{source}{why}")
        return formed, failures

    with fuser.enabled(True):
        report_seeds(seed_range(a.seeds), a.programs, "programs", run_seed)


if __name__ == "__main__":
    main()
