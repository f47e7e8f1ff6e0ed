"""Prints the table of 2/pi's bits that the CPU kernels' sin, cos and tan reduce large
arguments with (csrc/codegen/cpp_trig_prelude.h holds its output).

Row E holds (2^E * 2/pi) mod 4 in four parts of 26 bits each (the first from 2^1 down
to 2^-24), so that each part times a float's 24-bit integer significand is exact in
double. pi comes from Machin's formula in integers, to 600 bits.
"""

from fractions import Fraction

BITS = 600
# Row 0 stands in below 2^24 (every lane reads the table; only lanes above use it), rows
# 1 .. 104 are float exponents 2^1 .. 2^104 above the significand, row 105 inf and NaN's.
ROWS = 106
PART_BITS = 26


def arctan_of_inverse(n: int, bits: int) -> int:
    """arctan(1/n) * 2^bits, by its alternating series."""
    total, term, k = 0, (1 << bits) // n, 0
    while term:
        total += term // (2 * k + 1) if k % 2 == 0 else -(term // (2 * k + 1))
        term //= n * n
        k += 1
    return total


def rows() -> list[list[Fraction]]:
    pi = 4 * (4 * arctan_of_inverse(5, BITS) - arctan_of_inverse(239, BITS))
    two_over_pi = (2 << (2 * BITS)) // pi  # 2/pi * 2^BITS
    width = 4 * PART_BITS
    table = []
    for e in range(ROWS):
        window = ((two_over_pi << e) >> (BITS - (width - 2))) & ((1 << width) - 1)
        parts = [(window >> (PART_BITS * (3 - i))) & ((1 << PART_BITS) - 1) for i in range(4)]
        values = [Fraction(p, 1 << (24 + PART_BITS * i)) for i, p in enumerate(parts)]
        exact = Fraction(two_over_pi << e, 1 << BITS) % 4
        assert abs(sum(values) - exact) < Fraction(1, 1 << 102)
        table.append(values)
    return table


def table_text() -> str:
    """Each row as two doubles, parts 0 + 1 and parts 2 + 3 (52 bits each, exact): two
    table loads a lane instead of four; the kernels split the first sum again."""
    lines = []
    for c0, c1, c2, c3 in rows():
        pair = (c0 + c1, c2 + c3)
        assert all(Fraction(float(v)) == v for v in pair)
        lines.append("    " + ", ".join(float(v).hex() for v in pair) + ",\n")
    return "".join(lines)


if __name__ == "__main__":
    print(table_text(), end="")
