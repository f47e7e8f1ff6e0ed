"""Many seeds of tests/python/test_random_training.py's random training programs
against eager (the test itself runs one seed): prints each failing program and why,
then a count.

    PYTHONPATH=.:tests/python python tools/fuzz_training.py --device cuda --seeds 0:20
"""

from __future__ import annotations

import argparse
import random

from test_random_training import difference_from_eager, random_case

import fuser


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seeds", default="0:10", help="first:end")
    parser.add_argument("--programs", type=int, default=20, help="per seed")
    parser.add_argument("--column-sums", action="store_true", help="on CPU too (=all)")
    parser.add_argument(
        "--strict-layouts",
        action="store_true",
        help="gradients of transposed inputs laid out as TorchScript's or eager's",
    )
    a = parser.parse_args()
    first, end = (int(s) for s in a.seeds.split(":"))
    failures = programs = groups = 0
    fuser._C._set_column_sums(True, a.column_sums)
    with fuser.enabled(True):
        for seed in range(first, end):
            rng = random.Random(seed)
            for _ in range(a.programs):
                source, args, upstream_seed = random_case(rng, a.device)
                try:
                    why = difference_from_eager(source, args, upstream_seed, a.strict_layouts)
                except Exception as e:  # noqa: BLE001 - every failure is reported
                    why = f"raised {str(e)[:500]}"
                programs += 1
                groups += fuser.stats()["groups_formed"]
                if why is not None:
                    failures += 1
                    shapes = [tuple(t.shape) for t in args]
                    print(f"--- seed {seed}: {why}\n{source}inputs {shapes}\n", flush=True)
    print(f"{failures} of {programs} programs differ from eager ({groups} groups formed)")


if __name__ == "__main__":
    main()
