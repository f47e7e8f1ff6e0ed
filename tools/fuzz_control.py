"""Many seeds of tests/python/test_random_control.py's programs with control flow
against eager (the test itself runs one seed): prints each failing program with its
calls' arguments, then a count.

    FUSER_CROSS_COMPILE=sm_90 PYTHONPATH=.:tests/python python tools/fuzz_control.py --seeds 0:20
"""

from __future__ import annotations

import torch
from fuzz_seeds import parse_arguments, report_seeds, seed_range
from test_random_control import groups_over_control_programs

import fuser


def main() -> None:
    a = parse_arguments(__doc__, "programs", 40)
    torch._C._jit_set_num_profiled_runs(1)
    fuser._C._set_keep_singletons(True)  # single ops fuse too, as in the test

    def run_seed(seed: int) -> tuple[int, list[str]]:
        torch.manual_seed(seed)
        return groups_over_control_programs(seed, a.programs, a.device)

    report_seeds(seed_range(a.seeds), a.programs, "programs", run_seed)


if __name__ == "__main__":
    main()
