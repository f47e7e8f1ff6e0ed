"""CPU kernels compute values that change only from row to row (a squeeze-excite gate's
sigmoid(s) of an s broadcast along the rows) once per row, before the row's loop, and
step their offsets from row to row (csrc/codegen/cpp_printer.cpp: perRowExprs,
printStridedLoop). Every case is compared with eager: values, shape and strides, with
one and two threads (two threads start their ranges inside rows)."""

from __future__ import annotations

import pytest
import torch

import fuser
from helpers import script_from_source, torch_threads

GATE = """
def f(x, s, y):
    return x * torch.sigmoid(s + 1.0) + y
"""

# name: (x, s, y shapes; transpose x)
CASES = {
    # Late EfficientNet stages: rows of 49 and 196, one gate per (n, c) row.
    "se_gate_7x7": ((8, 256, 7, 7), (8, 256, 1, 1), (1,), False),
    "se_gate_14x14": ((2, 96, 14, 14), (2, 96, 1, 1), (1,), False),
    # One gate per channel for every image: offsets step across the batch dim's runs.
    "gate_per_channel": ((3, 40, 5, 5), (40, 1, 1), (5,), False),
    # Rows of 4 and 9, whose gate costs more than their elements: row by row.
    "short_rows_2x2": ((2, 300, 2, 2), (2, 300, 1, 1), (1,), False),
    "short_rows_3x3": ((4, 70, 3, 3), (4, 70, 1, 1), (3,), False),
    # Rows of 3 in runs of 40: a band of 32 rows, then 8 rows one by one; a gate per row,
    # and one per run (the same for a band's rows).
    "bands_then_rows": ((6, 40, 3), (6, 40, 1), (3,), False),
    "one_gate_per_run": ((6, 40, 3), (6, 1, 1), (1,), False),
    # A transposed x read in tiles, the gate per row of the tile's band.
    "transposed_tiles": ((300, 70), (300, 1), (300, 70), True),
}


def run(case: str, threads: int) -> tuple[torch.Tensor, torch.Tensor, dict[str, int]]:
    x_shape, s_shape, y_shape, transpose = CASES[case]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(*reversed(x_shape) if transpose else x_shape, generator=g)
    if transpose:
        x = x.t()
    s = torch.randn(*s_shape, generator=g)
    y = torch.randn(*y_shape, generator=g)
    with torch_threads(threads), fuser.enabled(True), torch.no_grad():
        fuser.reset_stats()
        f = script_from_source(GATE)
        for _ in range(3):
            got = f(x, s, y)
        stats = fuser.stats()
    return got, x * torch.sigmoid(s + 1.0) + y, stats


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("threads", [1, 2])
def test_gates_match_eager(case: str, threads: int) -> None:
    got, want, stats = run(case, threads)
    assert stats["kernel_launches"] >= 1 and stats["interpreted_runs"] == 0
    if CASES[case][3]:
        assert stats["tiled_launches"] >= 1
    assert got.shape == want.shape and got.stride() == want.stride()
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def printed_kernel(source: str, *args: torch.Tensor) -> str:
    """The CPU kernel printed for `source` (run three times on `args`), checked against
    eager. Each test's source is its own, so its kernel is printed in this test."""
    fuser.reset_stats()  # forgets the sources printed before
    with fuser.enabled(True), torch.no_grad():
        f = script_from_source(source)
        for _ in range(3):
            got = f(*args)
    eager = script_from_source(source)
    with fuser.enabled(False), torch.no_grad():
        want = eager(*args)
    assert got.stride() == want.stride()
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    kernels = [k for k in fuser.kernel_sources() if "fx_inner" in k]
    assert kernels, "no strided CPU kernel was printed"
    return kernels[-1][kernels[-1].rindex('extern "C" void') :]  # the kernel, not the prelude


def test_the_gate_is_computed_before_the_rows_loop() -> None:
    g = torch.Generator().manual_seed(2)
    x, s = torch.randn(2, 96, 14, 14, generator=g), torch.randn(2, 96, 1, 1, generator=g)
    kernel = printed_kernel("def f(x, s):\n    return x * torch.sigmoid(s - 0.5)\n", x, s)
    row_loop = kernel[kernel.index("for (int64_t j = fx_col;") : kernel.index("fx_i += fx_n;")]
    assert "fx_sigmoidf(" in kernel and "fx_sigmoidf(" not in row_loop
    assert "fx_run_left" in kernel  # offsets step from row to row


def test_a_cheap_row_value_keeps_the_bands_of_short_rows() -> None:
    # silu(x + b) costs more per element than the load of b per row: bands of short
    # rows, where b is read per element through the table.
    g = torch.Generator().manual_seed(1)
    x, b = torch.randn(4, 64, 3, 3, generator=g), torch.randn(64, 1, 1, generator=g)
    source = "def f(x, b):\n    return torch.nn.functional.silu(x + b) - 0.25\n"
    assert "fx_band_n" in printed_kernel(source, x, b)


def test_a_band_computes_its_gates_once_per_row() -> None:
    # Rows of 4 go by bands: the gates of a band's 32 rows first, then its elements,
    # each reading its row's gate (fx_rv*, through fx_tbl_row).
    g = torch.Generator().manual_seed(3)
    x, s = torch.randn(2, 300, 2, 2, generator=g), torch.randn(2, 300, 1, 1, generator=g)
    kernel = printed_kernel("def f(x, s):\n    return x * torch.sigmoid(s + 0.75)\n", x, s)
    band = kernel[kernel.index("fx_band_n") :]
    assert "fx_rv" in band and "fx_tbl_row[fx_e]" in band
    # The sigmoid is in the band's loop over rows and the rows' loop, not per element.
    elements = band[band.index("for (int64_t fx_e") : band.index("fx_i += fx_band_n")]
    assert "fx_sigmoidf(" not in elements


@pytest.mark.parametrize("row", [16, 20, 25, 31])
@pytest.mark.parametrize("threads", [1, 2])
def test_expensive_elements_take_bands_up_to_31(row: int, threads: int) -> None:
    # silu's exponential per element: rows of 17 to 31 go by bands too (no scalar tail),
    # rows of 16 (a whole number of vectors) one by one.
    g = torch.Generator().manual_seed(row)
    x, b = torch.randn(3, 70, row, generator=g), torch.randn(70, 1, generator=g)
    scale = row + threads / 10  # a kernel of its own per case, printed here
    source = f"def f(x, b):\n    return torch.nn.functional.silu(x + b) * {scale}\n"
    with torch_threads(threads):
        kernel = printed_kernel(source, x, b)
    assert "fx_inner < 32" in kernel
    assert "fx_inner % 16 != 0" in kernel
