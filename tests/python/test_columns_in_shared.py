"""CUDA column kernels that copy each thread's rows into shared memory before walking
them (Kernel::columns_in_shared), over inputs the walks from memory take as they come:
an input aligned to its element but not to a thread's vector (copied row by row), a
float16 input beside a float32 one (one row a thread, 2-byte copies), bool, uint8 and
float64 inputs, results stored through tiles, and rows at and one past the 96 KiB of
copies a block may take; with positions that let a warp copy its rows in 16-byte pieces
together, that let some warps do so, and that let none.

On CUDA every variant is forced in turn; the one in shared memory must have run exactly
where the device's rule takes it. On the CPU the values are checked and, where NVRTC is
installed (FUSER_CROSS_COMPILE), the CUDA form in shared memory must have been compiled
for sm_90 exactly where its copies fit."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
import torch
from test_reductions import compare
from test_softmax_over_leading_dims import compare_each_variant

import fuser
from helpers import devices

# Statistics over the channels of NCHW, then the normalized values (ConvNeXt's
# channels-first LayerNorm written out): x is copied, w (one value a channel, shared by
# every row) is read from memory.
LAYER_NORM = (
    "def f(x, w):\n"
    "    u = x.mean(1, keepdim=True)\n"
    "    d = x - u\n"
    "    return d / torch.sqrt((d * d).mean(1, keepdim=True) + 1e-6) * w\n"
)
# timm's LayerNorm2d: its result's rows lie apart (stored through tiles).
LAYER_NORM_2D = (
    "def f(x, w):\n"
    "    y = torch.layer_norm(x.permute(0, 2, 3, 1), [x.size(1)], w.flatten(), None, 1e-5)\n"
    "    return y.permute(0, 3, 1, 2)\n"
)
MIXED = "def f(x, y):\n    return torch.softmax(x.float() * y, 1)\n"
MASKED = "def f(x, m):\n    return torch.softmax(torch.where(m, x, -3.0), 1)\n"
SCALED = "def f(x, u):\n    return torch.log_softmax(x * u, 1)\n"


def misaligned(shape: tuple[int, ...], dtype: torch.dtype, device: str) -> torch.Tensor:
    """A contiguous tensor one element past an aligned start: aligned to its element, not
    to the pair of 16-bit rows a thread copies as one vector."""
    count = 1
    for s in shape:
        count *= s
    base = torch.randn(count + 1, device=device).to(dtype)
    return base[1:].view(shape)


def weight(channels: int, dtype: torch.dtype, device: str) -> torch.Tensor:
    return torch.randn(1, channels, 1, 1, device=device).to(dtype)


# case -> (text, inputs(channels, device), the dtype the comparison tolerates, bytes of
# copies per channel: 32 lanes x rows a thread x element size, summed over copied inputs)
Case = tuple[str, Callable[[int, str, tuple[int, int]], list[torch.Tensor]], torch.dtype, int]
CASES: dict[str, Case] = {
    "float16_misaligned": (
        LAYER_NORM,
        lambda c, d, hw: [misaligned((3, c, *hw), torch.float16, d), weight(c, torch.float16, d)],
        torch.float16,
        32 * 2 * 2,
    ),
    "bfloat16_misaligned": (
        LAYER_NORM,
        lambda c, d, hw: [misaligned((2, c, *hw), torch.bfloat16, d), weight(c, torch.bfloat16, d)],
        torch.bfloat16,
        32 * 2 * 2,
    ),
    "layer_norm_2d_float16": (
        LAYER_NORM_2D,
        lambda c, d, hw: [torch.randn(2, c, *hw, device=d).half(), weight(c, torch.float16, d)],
        torch.float16,
        32 * 2 * 2,
    ),
    "layer_norm_2d_float32": (
        LAYER_NORM_2D,
        lambda c, d, hw: [torch.randn(2, c, *hw, device=d), weight(c, torch.float32, d)],
        torch.float32,
        32 * 4,
    ),
    "float16_beside_float32": (
        MIXED,
        lambda c, d, hw: [
            torch.randn(3, c, *hw, device=d).half(),
            torch.randn(3, c, *hw, device=d),
        ],
        torch.float32,
        32 * (2 + 4),
    ),
    "bool_beside_float32": (
        MASKED,
        lambda c, d, hw: [
            torch.randn(3, c, *hw, device=d),
            torch.rand(3, c, *hw, device=d) > 0.3,
        ],
        torch.float32,
        32 * (4 + 1),
    ),
    "bool_beside_float16": (
        MASKED,
        lambda c, d, hw: [
            torch.randn(3, c, *hw, device=d).half(),
            torch.rand(3, c, *hw, device=d) > 0.3,
        ],
        torch.float16,
        32 * 2 * (2 + 1),
    ),
    "uint8_beside_float32": (
        SCALED,
        lambda c, d, hw: [
            torch.randn(3, c, *hw, device=d),
            torch.randint(0, 6, (3, c, *hw), device=d, dtype=torch.uint8),
        ],
        torch.float32,
        32 * (4 + 1),
    ),
    # A weight of stride 2 along the channels: read through its stride, where a weight
    # of unit stride is read at its element (every other case).
    "strided_weight": (
        LAYER_NORM,
        lambda c, d, hw: [
            torch.randn(2, c, *hw, device=d),
            torch.randn(1, 2 * c, 1, 1, device=d)[:, ::2],
        ],
        torch.float32,
        32 * 4,
    ),
    "float64": (
        LAYER_NORM,
        lambda c, d, hw: [
            torch.randn(3, c, *hw, device=d, dtype=torch.float64),
            weight(c, torch.float64, d),
        ],
        torch.float64,
        32 * 8,
    ),
}


def check(case: str, channels: int, device: str, hw: tuple[int, int] = (5, 7)) -> None:
    text, make, dtype, bytes_per_channel = CASES[case]
    args = make(channels, device, hw)
    copies = channels * bytes_per_channel
    if device == "cuda":
        in_shared = compare_each_variant(text, *args, dtype=dtype)
        takes = fuser._C._columns_in_shared_blocks(torch.cuda.current_device(), copies, False)
        assert (in_shared > 0) == (takes > 0), (in_shared, takes, copies)
        return
    before = len(fuser.kernel_sources())
    fuser.reset_stats()
    with fuser.enabled(True):
        compare(text, *args, dtype=dtype)
    stats = fuser.stats()
    assert stats["interpreted_runs"] == 0 and stats["row_launches"] >= 1, stats
    if os.environ.get("FUSER_CROSS_COMPILE") is None:
        return
    assert stats["cuda_cross_compile_failures"] == 0, stats
    compiled = [s for s in fuser.kernel_sources()[before:] if "fx_dyn" in s]
    # FUSER_CROSS_COMPILE takes the form in shared memory where its copies fit in 96 KiB.
    assert bool(compiled) == (copies <= 96 * 1024), (len(compiled), copies)


# Positions an image: 35 (no warp's rows aligned to 16 bytes: each lane copies its own
# rows), 64 (every warp's rows in one image: its lanes copy each element's rows of the
# warp in 16-byte pieces) and 48 (some warps' rows cross into the next image).
SPATIAL = [(5, 7), (8, 8), (6, 8)]


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("channels", [7, 64, 131])
@pytest.mark.parametrize("hw", SPATIAL, ids=str)
def test_inputs_of_every_kind_copied_into_shared_memory(
    case: str, channels: int, hw: tuple[int, int], device: str, variant_flags: None
) -> None:
    check(case, channels, device, hw)


@pytest.mark.ptxas
@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("case", ["float16_misaligned", "float16_beside_float32", "float64"])
def test_rows_at_and_past_the_copies_a_block_may_take(
    case: str, device: str, variant_flags: None
) -> None:
    """96 KiB of copies a block at most: the widest row that fits, and one past it."""
    bytes_per_channel = CASES[case][3]
    widest = 96 * 1024 // bytes_per_channel
    for channels in (widest, widest + 1):
        check(case, channels, device)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="reads a CUDA device's limits")
def test_the_rule_reads_the_devices_shared_memory() -> None:
    """The variant in shared memory is offered by the device's shared memory per block
    (opt-in) and per multiprocessor, as torch reports them: 96 KiB of copies a block at
    most beside 48 KiB of static arrays, 4 resident blocks where a tiled kernel's four
    fit a multiprocessor (8 KiB of static arrays each), 2 where two fit. (The
    multiprocessor's bytes were once read as its registers, 65536: 256 float channels
    were refused on the H200.)"""
    index = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    per_block = getattr(props, "shared_memory_per_block_optin", None)
    per_sm = getattr(props, "shared_memory_per_multiprocessor", None)
    if per_block is None or per_sm is None:
        pytest.skip("this torch does not report shared memory per multiprocessor")
    for copies in (8 << 10, 32 << 10, 48 << 10, 64 << 10, 96 << 10, (96 << 10) + 16):
        takes = props.major >= 8 and copies <= 96 << 10 and copies + (48 << 10) <= per_block
        two = 2 if takes and 2 * (copies + (8 << 10)) <= per_sm else 0
        four = 4 if takes and 4 * (copies + (8 << 10)) <= per_sm else two
        assert fuser._C._columns_in_shared_blocks(index, copies, False) == two, copies
        assert fuser._C._columns_in_shared_blocks(index, copies, True) == four, copies
    if (props.major, props.minor) == (9, 0):  # 227 KiB a block, 228 a multiprocessor
        assert fuser._C._columns_in_shared_blocks(index, 32 << 10, False) == 2
        assert fuser._C._columns_in_shared_blocks(index, 32 << 10, True) == 4
