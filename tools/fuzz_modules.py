"""Many seeds of tests/python/test_random_modules.py's random frozen convnets against
eager (the test itself runs one seed): prints each failing module with its inputs,
then a count.

    PYTHONPATH=.:tests/python python tools/fuzz_modules.py --seeds 0:20 [--onednn 0.5]
        [--bfloat16 0.3]

oneDNN Graph beside the fuser (CPU, `--onednn` odds) has a bug of its own: a 1x1
convolution without bias, a scale, BatchNorm and the add of the two last
(`bn(conv(x) * 0.5) + conv(x) * 0.5`) makes it allocate without bound (std::bad_alloc,
or the OOM killer) with the fuser not loaded at all; such modules then fail here. So does
a LayerNorm of a permuted tensor (`layer_norm(x.permute(0, 2, 3, 1), [C])`, ConvNeXt's):
oneDNN Graph's second call raises `vector::_M_range_check` with the fuser not loaded,
and the report says the deployment without the fuser raised too.
FUSER_CHANNELS_LAST=all runs the channels-last pass on CPU modules too.
"""

from __future__ import annotations

import argparse

import torch
from fuzz_seeds import parse_arguments, report_seeds, seed_range
from test_random_modules import groups_over_random_modules


def main() -> None:
    def more(p: argparse.ArgumentParser) -> None:
        p.add_argument("--onednn", type=float, default=0.0, help="odds of oneDNN Graph (CPU)")
        p.add_argument("--bfloat16", type=float, default=0.0, help="odds of a bfloat16 module")

    a = parse_arguments(__doc__, "modules", 10, more)
    torch._C._jit_set_num_profiled_runs(1)
    report_seeds(
        seed_range(a.seeds),
        a.modules,
        "modules",
        lambda seed: groups_over_random_modules(seed, a.modules, a.device, a.onednn, a.bfloat16),
    )


if __name__ == "__main__":
    main()
