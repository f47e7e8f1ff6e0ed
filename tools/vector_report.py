"""Which CPU kernels GCC left with a scalar loop, and which functions those kernels
call: for finding kernels that run element by element (session 58 found masks' `bool`
loads this way, 4x slower).

Runs the given pytest files in this process, compiles every CPU kernel they printed
again as the runtime does (`fuser._C._host_compile_command()`) with GCC's reports
(-fopt-info-vec-missed), and counts the kernels with a loop reported "no vectype". A
scalar call (libm's fmodf, powf, cosf, or a prelude function that makes one) leaves its
loop scalar, and GCC's message then names the load before it; so each function the
kernels call is listed with the kernels calling it that have such a loop, out of all
kernels calling it. A function whose every caller is scalar is the suspect; a kernel
with such a loop that calls nothing is printed.

usage: python tools/vector_report.py tests/python/test_ops.py [more test files]
"""

from __future__ import annotations

import collections
import os
import re
import shlex
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import pytest

import fuser

CALL = re.compile(r"\b([a-z_][a-z0-9_]*)(?:<[a-z0-9_]+>)?\(")
NOT_CALLS = {"for", "if", "while", "sizeof", "return", "switch"}


def scalar_loops(path: str) -> int:
    """Loops of the kernel in `path` that GCC reports as left scalar for want of a
    vector type."""
    command = [*shlex.split(fuser._C._host_compile_command()), "-fopt-info-vec-missed"]
    done = subprocess.run([*command, "-o", os.devnull, path], capture_output=True, text=True)
    # The float16 runs' loops are vector code already (F16C builtins on 16- and 32-byte
    # copies, which GCC reports as MEM <uint128_t> it cannot vectorize again).
    lines = done.stderr.splitlines()
    return sum("no vectype" in line and "MEM <" not in line for line in lines)


def kernel_calls(source: str) -> set[str]:
    """Functions the kernel's body calls (the prelude's fx_ ones and libm's)."""
    body = source[source.find('extern "C" void fuser_') :]
    return {m.group(1) for m in CALL.finditer(body)} - NOT_CALLS


def main() -> None:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))
    pytest.main(["-q", "-p", "no:cacheprovider", *sys.argv[1:]])
    sources = [s for s in fuser.kernel_sources() if "__global__" not in s]
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, source in enumerate(sources):
            paths.append(os.path.join(tmp, f"k{i}.cpp"))
            with open(paths[-1], "w") as f:
                f.write(source)
        with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
            counts = list(pool.map(scalar_loops, paths))
    scalar: collections.Counter[str] = collections.Counter()
    callers: collections.Counter[str] = collections.Counter()
    uncalled = []
    for source, count in zip(sources, counts, strict=True):
        calls = kernel_calls(source)
        callers.update(calls)
        if count:
            scalar.update(calls)
            if not calls:
                uncalled.append(source[source.find('extern "C" void fuser_') :])
    print(f"{len(sources)} CPU kernels, {sum(1 for c in counts if c)} with a scalar loop")
    ranked = sorted(scalar, key=lambda f: (-scalar[f] / callers[f], -scalar[f]))
    for call in ranked:
        print(f"  {call}: {scalar[call]} of the {callers[call]} kernels calling it")
    for text in uncalled:
        print("--- a scalar loop in a kernel that calls nothing:\n" + text)


if __name__ == "__main__":
    main()
