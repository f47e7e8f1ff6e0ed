"""Many seeds of tests/python/test_random_dtypes.py's mixed-dtype programs against eager
(the test itself runs one seed): prints each failing program with its inputs' dtypes,
shapes and strides, then a count.

    FUSER_CROSS_COMPILE=sm_90 PYTHONPATH=.:tests/python python tools/fuzz_dtypes.py --seeds 0:20

(With FUSER_CROSS_COMPILE, each CPU kernel is also compiled as CUDA for sm_90, and a
program whose CUDA source does not compile fails.)
"""

from __future__ import annotations

import argparse

import torch
from test_random_dtypes import groups_over_random_programs

import fuser


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seeds", default="0:10", help="first:end")
    parser.add_argument("--programs", type=int, default=40, help="per seed")
    a = parser.parse_args()
    torch._C._jit_set_num_profiled_runs(1)
    fuser._C._set_keep_singletons(True)  # single ops fuse too, as in the test
    first, end = (int(s) for s in a.seeds.split(":"))
    failed = groups = 0
    for seed in range(first, end):
        torch.manual_seed(seed)
        formed, failures = groups_over_random_programs(seed, a.programs, a.device)
        groups += formed
        failed += len(failures)
        for failure in failures:
            print(f"FAIL seed {seed}\n{failure}\n---", flush=True)
    print(f"{(end - first) * a.programs} programs, {groups} groups, {failed} failures")


if __name__ == "__main__":
    main()
