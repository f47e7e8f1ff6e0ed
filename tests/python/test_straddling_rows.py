"""CUDA kernels whose rows are not a whole number of vectors (a squeeze-excite gate over
rows of 7 x 7 = 49 elements) walk them as flat vectors that may cross into the next row,
when every output is dense over the whole iteration space (csrc/codegen/cuda_printer.cpp:
straddlingRowVectors, printStraddlingVectors). Inputs dense like the outputs move as
vectors, inputs broadcast along the rows are read once per row, and other inputs read
along the rows (a slice, a spatial gate broadcast over the channels) load lane by lane.
A vector that crosses a row's end reads, in each lane, its own row's values; the last,
partial vector goes element by element. Values, shapes and strides equal eager's on the
GPU; without one the kernels' CUDA forms compile through NVRTC."""

from __future__ import annotations

import pytest
import torch

import fuser
from fuser import _C
from helpers import eager_from_source, run_optimized, script_from_source

nvrtc_ok, nvrtc_why = _C.nvrtc_available()
needs_nvrtc = pytest.mark.skipif(not nvrtc_ok, reason=f"NVRTC not found: {nvrtc_why}")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

GATE = torch._C.parse_ir(
    """
graph(%x : Tensor, %s : Tensor):
  %g : Tensor = aten::sigmoid(%s)
  %o : Tensor = aten::mul(%x, %g)
  return (%o)
"""
)


@needs_nvrtc
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str
)
def test_the_straddling_loop_compiles_for_sm90(dtype: torch.dtype) -> None:
    source = _C.kernel_source(GATE, [dtype, dtype], [False, False], "cuda", "flat_broadcast_rows")
    # Vectors find their row once; crossing ones pick each lane's row's gate.
    assert "const idx_t fx_row = fx_e / fx_inner;" in source
    assert "const idx_t base_off1 = u < fx_split ? row_off1 : next_off1;" in source
    assert _C.nvrtc_compile(source, 9, 0)[:4] == b"\x7fELF"
    # Over a slice of x (dense along its rows only) x loads lane by lane, from the lane's
    # own row and column.
    sliced = _C.kernel_source(GATE, [dtype, dtype], [False, False], "cuda", "broadcast_rows")
    assert "fx_ld(a.in0 + base_off0 + fx_lj)" in sliced
    assert "fx_lj = u < fx_split ? fx_j + u : fx_j + u - fx_inner;" in sliced
    assert _C.nvrtc_compile(sliced, 9, 0)[:4] == b"\x7fELF"


SOURCE = """
def f(x, s, y):
    return x * torch.sigmoid(s + 0.5) + y
"""

# name: x shape, s shape, y shape. Large enough cases take vectors (the launch asks for
# them from 128 threads per SM of work); the small one goes element-wise.
CASES = {
    "rows_of_49": ((16, 128, 7, 7), (16, 128, 1, 1), (1,)),
    "rows_of_225": ((8, 96, 15, 15), (8, 96, 1, 1), (1,)),  # longer than the row path's 128
    "rows_of_9": ((64, 256, 3, 3), (64, 256, 1, 1), (1,)),  # 16-bit vectors of 8 cross most
    "rows_of_5": ((128, 256, 5), (128, 256, 1), (1,)),  # shorter than 16-bit vectors
    "a_partial_last_vector": ((17, 129, 7, 7), (17, 129, 1, 1), (1,)),  # numel odd
    "gate_per_channel": ((16, 128, 7, 7), (128, 1, 1), (1,)),  # one gate for every image
    "two_tensors_along_rows": ((16, 128, 7, 7), (16, 128, 1, 1), (16, 128, 7, 7)),
    # y broadcast over the channels, read along the rows lane by lane (a spatial gate).
    "spatial_y": ((16, 128, 7, 7), (16, 128, 1, 1), (16, 1, 7, 7)),
    "spatial_y_rows_of_9": ((64, 256, 3, 3), (64, 256, 1, 1), (64, 1, 3, 3)),
    "small": ((2, 8, 7, 7), (2, 8, 1, 1), (1,)),
}


def check(x: torch.Tensor, s: torch.Tensor, y: torch.Tensor) -> None:
    before = fuser.stats()
    got = run_optimized(script_from_source(SOURCE), x, s, y)
    want = eager_from_source(SOURCE)(x, s, y)
    after = fuser.stats()
    assert after["kernel_launches"] > before["kernel_launches"], "nothing ran fused"
    assert after["interpreted_runs"] == before["interpreted_runs"]
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.stride() == want.stride()
    torch.testing.assert_close(got, want)


@needs_cuda
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_gates_match_eager(fused, case: str, dtype: torch.dtype) -> None:
    g = torch.Generator(device="cuda").manual_seed(5)
    x, s, y = (torch.randn(shape, device="cuda", generator=g).to(dtype) for shape in CASES[case])
    check(x, s, y)


@needs_cuda
@pytest.mark.parametrize("rows", [(7, 7), (15, 15), (14, 14)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_a_sliced_x_loads_lane_by_lane(fused, rows: tuple[int, int], dtype: torch.dtype) -> None:
    # x is every other channel of a wider tensor: dense along its rows, not across them.
    g = torch.Generator(device="cuda").manual_seed(7)
    wide = torch.randn(16, 256, *rows, device="cuda", generator=g).to(dtype)
    s = torch.randn(16, 128, 1, 1, device="cuda", generator=g).to(dtype)
    check(wide[:, ::2], s, torch.randn(1, device="cuda", generator=g).to(dtype))
    check(wide[:, 1:129], s, torch.randn(*rows, device="cuda", generator=g).to(dtype))


@needs_cuda
def test_an_unaligned_x_goes_element_by_element(fused) -> None:
    # x starts one element into its storage: dense, but not aligned to vectors.
    g = torch.Generator(device="cuda").manual_seed(6)
    x = torch.randn(16 * 128 * 49 + 1, device="cuda", generator=g)[1:].view(16, 128, 7, 7)
    s = torch.randn(16, 128, 1, 1, device="cuda", generator=g)
    check(x, s, torch.randn(1, device="cuda", generator=g))
