"""What the fuzz tools share: their command line (a device, a range of seeds, cases per
seed) and the loop that runs each seed's cases, prints every failure and a count."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def parse_arguments(
    doc: str,
    unit: str,
    per_seed: int,
    more: Callable[[argparse.ArgumentParser], None] | None = None,
) -> argparse.Namespace:
    """--device, --seeds first:end and --<unit> (cases per seed), then what `more` adds."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seeds", default="0:10", help="first:end")
    parser.add_argument(f"--{unit}", type=int, default=per_seed, help="per seed")
    if more is not None:
        more(parser)
    return parser.parse_args()


def seed_range(text: str) -> range:
    first, end = (int(s) for s in text.split(":"))
    return range(first, end)


def report_seeds(
    seeds: range, per_seed: int, unit: str, run_seed: Callable[[int], tuple[int, list[str]]]
) -> None:
    """Runs `run_seed(seed)` (the groups its cases formed, their failures) for each seed."""
    failed = groups = 0
    for seed in seeds:
        formed, failures = run_seed(seed)
        groups += formed
        failed += len(failures)
        for failure in failures:
            print(f"FAIL seed {seed}\n{failure}\n---", flush=True)
    print(f"{len(seeds) * per_seed} {unit}, {groups} groups, {failed} failures")
