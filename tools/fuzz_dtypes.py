"""Many seeds of tests/python/test_random_dtypes.py's mixed-dtype programs against eager
(the test itself runs one seed): prints each failing program with its inputs' dtypes,
shapes and strides, then a count.

    FUSER_CROSS_COMPILE=sm_90 PYTHONPATH=.:tests/python python tools/fuzz_dtypes.py --seeds 0:20

(With FUSER_CROSS_COMPILE, each CPU kernel is also compiled as CUDA for sm_90, and a
program whose CUDA source does not compile fails.)
"""

from __future__ import annotations

import torch
from fuzz_seeds import parse_arguments, report_seeds, seed_range
from test_random_dtypes import groups_over_random_programs

import fuser


def main() -> None:
    a = parse_arguments(__doc__, "programs", 40)
    torch._C._jit_set_num_profiled_runs(1)
    fuser._C._set_keep_singletons(True)  # single ops fuse too, as in the test

    def run_seed(seed: int) -> tuple[int, list[str]]:
        torch.manual_seed(seed)
        return groups_over_random_programs(seed, a.programs, a.device)

    report_seeds(seed_range(a.seeds), a.programs, "programs", run_seed)


if __name__ == "__main__":
    main()
