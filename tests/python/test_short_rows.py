"""CPU kernels over rows shorter than kShortRow elements (csrc/codegen/cpp_printer.cpp,
printShortBand): whole bands of rows run as one flat loop, each strided tensor read
through a table of offsets. The bands start only where a whole band of rows is left in
the range and in the current run of the rows' dimension; the other rows go one by one.
Every case is compared with eager: values, shape and strides."""

from __future__ import annotations

import pytest
import torch

import fuser
from helpers import script_from_source, torch_threads

SOURCE = """
def f(x, y):
    return torch.nn.functional.silu(x + y) * 2.0
"""

CASES = {
    # A [7] operand along W: rows of 7 over 4 * 1152 * 7 rows, all in bands.
    "along_the_last_dim": ((4, 1152, 7, 7), (7,), False),
    # The rows' dim has 40 rows: bands for the first rows of each run, then rows one by one.
    "runs_of_40_rows": ((6, 40, 3), (6, 1, 3), False),
    # Runs shorter than a band: rows one by one.
    "runs_of_5_rows": ((64, 5, 3), (64, 1, 3), False),
    # A transposed operand: both of its strides in the table.
    "transposed_operand": ((300, 6), (6, 300), True),
    # Rows of 15, just under the threshold: runs of 64 rows, two whole bands each.
    "rows_of_15": ((3, 64, 15), (3, 1, 15), False),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("threads", [1, 2])
def test_short_rows_match_eager(case: str, threads: int) -> None:
    x_shape, y_shape, transpose = CASES[case]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(*x_shape, generator=g)
    y = torch.randn(*y_shape, generator=g)
    if transpose:
        y = y.t()
    with torch_threads(threads), fuser.enabled(True), torch.no_grad():
        fuser.reset_stats()
        f = script_from_source(SOURCE)
        for _ in range(3):
            got = f(x, y)
        launches = fuser.stats()["kernel_launches"]
    want = torch.nn.functional.silu(x + y) * 2.0
    assert launches >= 1
    assert got.shape == want.shape and got.stride() == want.stride()
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
