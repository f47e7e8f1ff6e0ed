"""Many seeds of tests/python/test_random_training.py's random training programs
against eager (the test itself runs one seed): prints each failing program and why,
then a count.

    PYTHONPATH=.:tests/python python tools/fuzz_training.py --device cuda --seeds 0:20
"""

from __future__ import annotations

import argparse
import random

from fuzz_seeds import parse_arguments, report_seeds, seed_range
from test_random_training import difference_from_eager, random_case

import fuser


def more_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--column-sums", action="store_true", help="on CPU too (=all)")
    parser.add_argument(
        "--strict-layouts",
        action="store_true",
        help="gradients of transposed inputs laid out as TorchScript's or eager's",
    )


def main() -> None:
    a = parse_arguments(__doc__, "programs", 20, more_arguments)
    fuser._C._set_column_sums(True, a.column_sums)

    def run_seed(seed: int) -> tuple[int, list[str]]:
        rng = random.Random(seed)
        formed, failures = 0, []
        for _ in range(a.programs):
            source, args, upstream_seed = random_case(rng, a.device)
            fuser.reset_stats()
            try:
                why = difference_from_eager(source, args, upstream_seed, a.strict_layouts)
            except Exception as e:  # noqa: BLE001 - every failure is reported
                why = f"raised {str(e)[:500]}"
            formed += fuser.stats()["groups_formed"]
            if why is not None:
                shapes = [tuple(t.shape) for t in args]
                failures.append(f"{why}\n{source}inputs {shapes}")
        return formed, failures

    with fuser.enabled(True):
        report_seeds(seed_range(a.seeds), a.programs, "programs", run_seed)


if __name__ == "__main__":
    main()
