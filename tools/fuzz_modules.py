"""Many seeds of tests/python/test_random_modules.py's random frozen convnets against
eager (the test itself runs one seed): prints each failing module with its inputs,
then a count.

    PYTHONPATH=.:tests/python python tools/fuzz_modules.py --seeds 0:20 [--onednn 0.5]

oneDNN Graph beside the fuser (CPU, `--onednn` odds) has a bug of its own: a 1x1
convolution without bias, a scale, BatchNorm and the add of the two last
(`bn(conv(x) * 0.5) + conv(x) * 0.5`) makes it allocate without bound (std::bad_alloc,
or the OOM killer) with the fuser not loaded at all; such modules then fail here.
"""

from __future__ import annotations

import argparse

import torch
from test_random_modules import groups_over_random_modules


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seeds", default="0:10", help="first:end")
    parser.add_argument("--modules", type=int, default=10, help="per seed")
    parser.add_argument("--onednn", type=float, default=0.0, help="odds of oneDNN Graph (CPU)")
    a = parser.parse_args()
    torch._C._jit_set_num_profiled_runs(1)
    first, end = (int(s) for s in a.seeds.split(":"))
    failed = groups = 0
    for seed in range(first, end):
        formed, failures = groups_over_random_modules(seed, a.modules, a.device, a.onednn)
        groups += formed
        failed += len(failures)
        for failure in failures:
            print(f"FAIL seed {seed}\n{failure}\n---", flush=True)
    print(f"{(end - first) * a.modules} modules, {groups} groups, {failed} failures")


if __name__ == "__main__":
    main()
