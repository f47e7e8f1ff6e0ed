"""Many seeds of tests/python/test_random_dtypes.py's mixed-dtype programs against eager
(the test itself runs one seed), or with --control-flow of test_random_control.py's
(the same steps around an if/else and a for loop): prints each failing program with its
calls' dtypes, shapes and strides, then a count.

    FUSER_CROSS_COMPILE=sm_90 PYTHONPATH=.:tests/python python tools/fuzz_dtypes.py --seeds 0:20

(With FUSER_CROSS_COMPILE, each CPU kernel is also compiled as CUDA for sm_90, and a
program whose CUDA source does not compile fails.)
"""

from __future__ import annotations

import argparse

import torch
from fuzz_seeds import parse_arguments, report_seeds, seed_range
from test_random_control import random_control_program
from test_random_dtypes import groups_over_random_programs, random_program

import fuser


def main() -> None:
    def more(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--control-flow",
            action="store_true",
            help="programs with an if/else and a for loop (test_random_control.py)",
        )

    a = parse_arguments(__doc__, "programs", 40, more)
    make, calls = (random_control_program, 3) if a.control_flow else (random_program, 2)
    torch._C._jit_set_num_profiled_runs(1)
    fuser._C._set_keep_singletons(True)  # single ops fuse too, as in the test

    def run_seed(seed: int) -> tuple[int, list[str]]:
        torch.manual_seed(seed)
        return groups_over_random_programs(seed, a.programs, a.device, make, calls)

    report_seeds(seed_range(a.seeds), a.programs, "programs", run_seed)


if __name__ == "__main__":
    main()
