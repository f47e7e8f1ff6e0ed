"""Checks the rule behind the CUDA prelude's fx_hquot and fx_bfquot (codegen/
cuda_prelude.h) on every pair of 16-bit values, by emulating it in NumPy's IEEE float32:
a quotient a / b rounded to float16 or bfloat16 as eager rounds it (float division, then
the format) is taken as a * (1 / b) where that product lies more than 3 float ulps from
a midpoint of the format and both the format's and float's spacing are full there, else
as the division. The kernels compute exactly these float operations (NVRTC without
fast math: IEEE division and products, no contraction of a product whose result is
only rounded).

    python tools/check_row_quotient.py [--format float16|bfloat16|both] [--step N]

--step N takes every N-th divisor (every one by default: 2^32 pairs a format, about
three minutes for float16 and one for bfloat16 on one core). Prints the mismatches
(there should be none) and the share of pairs that take the division."""

from __future__ import annotations

import argparse
import time

import numpy as np

FLOAT_MAX = np.float32(3.4028234663852886e38)


def every_value(fmt: str) -> np.ndarray:
    """Every bit pattern of the format, as the float32 each stands for."""
    bits = np.arange(65536, dtype=np.uint32)
    if fmt == "float16":
        return bits.astype(np.uint16).view(np.float16).astype(np.float32)
    return (bits << 16).view(np.float32)


def rounded(x: np.ndarray, fmt: str) -> np.ndarray:
    """x rounded to the format (to nearest, ties to even), as 16-bit patterns; every NaN
    as one pattern (eager's and the kernel's NaNs are compared as NaNs)."""
    if fmt == "float16":
        out = x.astype(np.float16).view(np.uint16)
    else:
        u = x.view(np.uint32)
        out = ((u + np.uint32(0x7FFF) + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FFF), out)


def takes_division(q: np.ndarray, rb: np.ndarray, fmt: str) -> np.ndarray:
    """fx_hquot's and fx_bfquot's test, element for element."""
    bits = q.view(np.uint32)
    if fmt == "float16":
        near = ((bits & np.uint32(0x1FFF)) - np.uint32(0x0FFD)) <= np.uint32(6)
        return near | ((np.abs(q) < np.float32(2.0**-14)) & (q != 0))
    near = ((bits & np.uint32(0xFFFF)) - np.uint32(0x7FFD)) <= np.uint32(6)
    tiny = (np.abs(q) < np.float32(2.0**-126)) & (q != 0)
    normal_rb = (np.abs(rb) >= np.float32(2.0**-126)) & (np.abs(rb) <= FLOAT_MAX)
    return near | tiny | ~normal_rb


def check(fmt: str, step: int) -> int:
    a = every_value(fmt)[None, :]
    divisors = every_value(fmt)[::step]
    mismatches = divisions = pairs = 0
    start = time.time()
    with np.errstate(all="ignore"):
        for i in range(0, divisors.size, 64):
            b = divisors[i : i + 64, None]
            rb = np.float32(1.0) / b
            q = a * rb
            exact = a / b
            slow = takes_division(q, rb, fmt)
            got = rounded(np.where(slow, exact, q), fmt)
            want = rounded(exact, fmt)
            wrong = got != want
            if wrong.any() and mismatches < 10:
                r, c = np.argwhere(wrong)[0]
                pair = f"a={a[0, c]!r} b={b[r, 0]!r}"
                print(f"{fmt}: {pair} got {got[r, c]:#06x} want {want[r, c]:#06x}")
            mismatches += int(wrong.sum())
            divisions += int(slow.sum())
            pairs += wrong.size
    print(
        f"{fmt}: {pairs} pairs, {mismatches} mismatches, {divisions / pairs:.4%} take the "
        f"division ({time.time() - start:.0f} s)"
    )
    return mismatches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--format", choices=["float16", "bfloat16", "both"], default="both")
    parser.add_argument("--step", type=int, default=1)
    args = parser.parse_args()
    formats = ["float16", "bfloat16"] if args.format == "both" else [args.format]
    bad = sum(check(fmt, args.step) for fmt in formats)
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
