"""Instructions per loop of a benchmark row's CUDA kernels, read from their SASS.

On a machine without a GPU: runs the row's scripted function on the CPU with
FUSER_CROSS_COMPILE=sm_90, so that each fused group's CUDA forms are printed beside its
CPU kernel, compiles each with `nvcc -cubin` for sm_90 and lists every loop of its SASS
(a backward branch): its static instruction count and the most frequent opcodes. A
column or row kernel's walk is one such loop, so its instructions per element follow
from its unrolling. Registers and shared memory come from `ptxas -v`.

Needs nvcc and cuobjdump (pip's nvidia-cuda-cuobjdump puts one under
site-packages/nvidia/cu13/bin). The forms are the variants the CPU's plan prints for
the row's `size` there, which may differ from those a GPU picks at its own sizes.

usage: python tools/sass_loops.py layer_norm_channels float16 [--size small]
           [--cuobjdump PATH] [--keep DIR] [--only fx_dyn]
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# The CUDA prelude's integer typedefs stand in for <stdint.h> under NVRTC; nvcc has it.
TYPEDEF = re.compile(
    r"^typedef (unsigned )?(long long|int|short|char|signed char|unsigned char|unsigned int|"
    r"unsigned short) +u?int[0-9]+_t;$",
    re.MULTILINE,
)
INSTRUCTION = re.compile(r"^\s+/\*([0-9a-f]{4,6})\*/\s+(.*?)\s*;", re.MULTILINE)
BRANCH = re.compile(r"BRA (?:`\(\.L_x_\d+\) )?0x([0-9a-f]+)")


def cuda_forms(workload: str, dtype: str, size: str) -> list[str]:
    """The CUDA kernels printed while the row's function runs three times on the CPU
    (profiled, optimized, run)."""
    os.environ.setdefault("FUSER_CROSS_COMPILE", "sm_90")
    import torch

    import fuser
    from fuser.bench import workloads

    fuser.enable()
    wl = workloads.WORKLOADS[workload]
    fn = wl.scripted_function()
    args = workloads.make_inputs(wl, size, getattr(torch, dtype), torch.device("cpu"))
    before = len(fuser.kernel_sources())
    with torch.no_grad():
        for _ in range(3):
            fn(*args)
    return [s for s in fuser.kernel_sources()[before:] if "__global__" in s]


def find_cuobjdump(given: str | None) -> str:
    if given:
        return given
    found = shutil.which("cuobjdump")
    if found:
        return found
    for entry in sys.path:
        candidate = Path(entry) / "nvidia" / "cu13" / "bin" / "cuobjdump"
        if candidate.exists():
            return str(candidate)
    sys.exit("no cuobjdump: pip install nvidia-cuda-cuobjdump, or pass --cuobjdump")


def loops(sass: str) -> list[tuple[int, int, int, list[tuple[str, int]]]]:
    """(start, end, instructions, commonest opcodes) of each loop: a branch back to an
    earlier address."""
    code = [(int(a, 16), text) for a, text in INSTRUCTION.findall(sass)]
    index = {address: i for i, (address, _) in enumerate(code)}
    found = []
    for i, (address, text) in enumerate(code):
        match = BRANCH.search(text)
        if not match:
            continue
        target = int(match.group(1), 16)
        if target >= address or target not in index:
            continue
        body = code[index[target] : i + 1]
        ops: collections.Counter[str] = collections.Counter()
        for _, instruction in body:
            words = instruction.split()
            op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
            ops[op.split(".")[0]] += 1
        found.append((target, address, len(body), ops.most_common(12)))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload")
    parser.add_argument("dtype")
    parser.add_argument("--size", default="small")
    parser.add_argument("--cuobjdump")
    parser.add_argument("--keep", type=Path, help="folder for the .cu and .sass files")
    parser.add_argument("--only", help="kernels whose source holds this text (fx_dyn: in shared)")
    args = parser.parse_args()
    cuobjdump = find_cuobjdump(args.cuobjdump)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="sass_loops_"))
    folder.mkdir(parents=True, exist_ok=True)
    for n, source in enumerate(cuda_forms(args.workload, args.dtype, args.size)):
        if args.only and args.only not in source:
            continue
        bounds = re.search(r"__launch_bounds__\([0-9, ]*\)", source)
        cu = folder / f"kernel{n}.cu"
        cu.write_text("#include <stdint.h>\n" + TYPEDEF.sub("", source))
        cubin = cu.with_suffix(".cubin")
        built = subprocess.run(
            ["nvcc", "-arch=sm_90", "-cubin", "-Xptxas", "-v", str(cu), "-o", str(cubin)],
            capture_output=True,
            text=True,
        )
        if built.returncode != 0:
            print(f"kernel {n}: nvcc failed\n{built.stderr[-2000:]}")
            continue
        usage = [line.split(":", 1)[-1].strip() for line in built.stderr.splitlines()]
        usage = [line for line in usage if "registers" in line]
        sass = subprocess.run(
            [cuobjdump, "-sass", str(cubin)], capture_output=True, text=True, check=True
        ).stdout
        cu.with_suffix(".sass").write_text(sass)
        in_shared = " in shared" if "fx_dyn" in source else ""
        print(f"kernel {n}{in_shared} {bounds.group(0) if bounds else ''}: {'; '.join(usage)}")
        for start, end, total, ops in loops(sass):
            listed = ", ".join(f"{op} {count}" for op, count in ops)
            print(f"  loop {start:#06x}-{end:#06x}: {total} instructions ({listed})")
    print(f"sources and SASS in {folder}")


if __name__ == "__main__":
    main()
