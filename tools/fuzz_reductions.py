"""Many seeds of tests/python/test_random_reductions.py's random programs against eager
(the test itself runs one seed): prints each failing program with its input shapes and
strides, then a count.

    PYTHONPATH=.:tests/python python tools/fuzz_reductions.py --device cuda --seeds 0:20
"""

from __future__ import annotations

import argparse
import random

import torch
from test_output_layout import random_tensor
from test_random_reductions import SHAPES, difference_from_eager, random_program

import fuser


def check(source: str, args: list[torch.Tensor]) -> str | None:
    """The test's difference from eager, or the error the program raised."""
    try:
        return difference_from_eager(source, args)
    except Exception as e:  # noqa: BLE001 - every failure is reported
        return str(e)[:500]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seeds", default="0:10", help="first:end")
    parser.add_argument("--programs", type=int, default=40, help="per seed")
    a = parser.parse_args()
    first, end = (int(s) for s in a.seeds.split(":"))
    failures = programs = groups = 0
    with fuser.enabled(True):
        for seed in range(first, end):
            rng = random.Random(seed)
            for _ in range(a.programs):
                shape = rng.choice(SHAPES)
                source, num_inputs = random_program(rng, len(shape))
                args = [random_tensor(rng, shape, a.device) for _ in range(num_inputs)]
                fuser.reset_stats()
                why = check(source, args)
                programs += 1
                groups += fuser.stats()["groups_formed"]
                if why is not None:
                    failures += 1
                    strides = [tuple(t.stride()) for t in args]
                    print(f"FAIL seed {seed} shape {shape} strides {strides}\n{source}{why}\n---")
    print(f"{programs} programs, {groups} groups, {failures} failures")


if __name__ == "__main__":
    main()
