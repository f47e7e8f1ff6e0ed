"""softmax and log_softmax over a dim before the last (channels of NCHW, a leading dim)
fuse with the elementwise ops around them: the row executor walks their rows as
columns, neighbouring rows side by side, as it walks reductions over other dims than
the trailing ones (test_column_reductions.py), and stores the result contiguous, as
eager's is. Where that store would transpose (a normalization over a transposed or
permuted input's last dim: its result, contiguous, lays its rows out otherwise than its
input), the column kernel stores it through its strides (the CPU through a tile of each
row's elements)."""

from __future__ import annotations

import os
import re
import threading

import pytest
import torch
from test_reductions import compare, subgraph_kinds

import fuser
from helpers import devices

SOFTMAXES = {"aten::softmax", "aten::log_softmax"}

# Each normalizes over a dim before the last of x and y ([6, 19, 33, 40] unless said).
CASES = {
    "softmax_channels": "def f(x, y):\n    return torch.softmax(x * 0.5 + y, 1)\n",
    "log_softmax_channels": "def f(x, y):\n    return torch.log_softmax(x - y, 1) * 2.0\n",
    "softmax_leading": "def f(x, y):\n    return torch.softmax(x, 0) + y\n",
    "softmax_and_input": (
        "def f(x, y):\n    z = x * y\n"
        "    return z, torch.softmax(z, -2), torch.log_softmax(z, -2)\n"
    ),
}


def inputs(device: str, dtype: torch.dtype, shape: tuple[int, ...]) -> list[torch.Tensor]:
    return [(torch.randn(shape, device=device) * 3).to(dtype) for _ in range(2)]


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("shape", [(6, 19, 33, 40), (3, 5, 7, 1), (1, 300, 2, 9)], ids=str)
def test_softmax_over_a_leading_dim_fuses_as_columns(
    case: str, dtype: torch.dtype, device: str, shape: tuple[int, ...]
) -> None:
    args = inputs(device, dtype, shape)
    fuser.reset_stats()
    with fuser.enabled(True):
        fn = compare(CASES[case], *args, dtype=dtype)
    stats = fuser.stats()
    assert stats["row_launches"] >= 2 and stats["interpreted_runs"] == 0, stats
    assert stats["cuda_cross_compile_failures"] == 0, stats
    assert subgraph_kinds(fn, *args) & SOFTMAXES, case


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("splits", [3, 64], indirect=True)
def test_softmax_over_a_leading_dim_in_slices(device: str, splits: int) -> None:
    """Few rows, each cut in slices: the column kernel's stages store the result."""
    args = inputs(device, torch.float32, (400, 3, 5))
    fuser.reset_stats()
    with fuser.enabled(True):
        compare(CASES["softmax_leading"], *args)
    stats = fuser.stats()
    assert stats["staged_calls"] >= 1 and stats["interpreted_runs"] == 0, stats


@pytest.mark.parametrize("device", devices())
def test_values_that_overflow_or_are_not_numbers(device: str) -> None:
    """A column of -inf (softmax's NaN), +inf, a NaN, and large values whose exps
    overflow without the column's maximum taken first."""
    x = torch.randn(4, 6, 5, device=device) * 50
    x[:, :, 0] = float("-inf")
    x[1, 2, 1] = float("inf")
    x[2, 3, 2] = float("nan")
    y = torch.randn(4, 6, 5, device=device)
    with fuser.enabled(True):
        compare(CASES["softmax_channels"], x, y)
        compare(CASES["log_softmax_channels"], x, y)
    assert fuser.stats()["interpreted_runs"] == 0


@pytest.mark.parametrize("device", devices())
def test_a_later_call_with_other_strides_gives_eager_values(device: str) -> None:
    """Profiled contiguous, then called with a transposed and a channels-last input:
    each call's result has eager's values and strides (the guard sends other layouts
    to the fallback, or the group walks them as they are)."""
    text = CASES["softmax_channels"]
    x, y = inputs(device, torch.float32, (2, 8, 5, 6))
    fn = None
    with fuser.enabled(True):
        fn = compare(text, x, y)
        for a, b in [
            (x.transpose(2, 3).contiguous().transpose(2, 3), y),
            (x.contiguous(memory_format=torch.channels_last), y),
        ]:
            got = fn(a, b)  # type: ignore[operator]
            want = torch.softmax(a * 0.5 + b, 1)
            assert got.stride() == want.stride()
            torch.testing.assert_close(got, want)


# A normalization over a transposed or permuted input's last dim: its contiguous result
# lays the rows out otherwise than its input.
TRANSPOSING = {
    # MLP-Mixer's residual stream: [B, N, C] laid out as [B, C, N].
    "layer_norm_transposed": (
        "def f(x, y, w, b):\n    z = x + y\n    return z, torch.layer_norm(z, [12], w, b, 1e-6)\n",
        lambda d: (
            torch.randn(3, 12, 9, device=d).transpose(1, 2),
            torch.randn(3, 12, 9, device=d).transpose(1, 2),
            torch.randn(12, device=d),
            torch.randn(12, device=d),
        ),
    ),
    # timm's LayerNorm2d of an NCHW activation.
    "layer_norm_2d": (
        "def f(x, y, w, b):\n"
        "    z = torch.layer_norm((x + y).permute(0, 2, 3, 1), [12], w, b, 1e-6)\n"
        "    return z.permute(0, 3, 1, 2) * 2.0\n",
        lambda d: (
            torch.randn(2, 12, 5, 7, device=d),
            torch.randn(2, 12, 5, 7, device=d),
            torch.randn(12, device=d),
            torch.randn(12, device=d),
        ),
    ),
    "softmax_transposed": (
        "def f(x, y, w, b):\n    return torch.softmax(x.transpose(1, 2) * 3.0, -1) + w\n",
        lambda d: (
            torch.randn(3, 12, 9, device=d),
            torch.randn(1, device=d),
            torch.randn(12, device=d),
            torch.randn(1, device=d),
        ),
    ),
}


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("case", sorted(TRANSPOSING))
def test_normalizations_whose_store_transposes(device: str, case: str) -> None:
    """Its rows are columns of the input and runs of its contiguous result: the column
    kernel reads them side by side and stores the result through its strides (the CPU
    through a tile of each row's elements), in one group with the ops around it."""
    text, make = TRANSPOSING[case]
    args = make(device)
    fuser.reset_stats()
    with fuser.enabled(True):
        fn = compare(text, *args)
    kinds = subgraph_kinds(fn, *args)
    assert kinds & (SOFTMAXES | {"aten::layer_norm", "aten::native_layer_norm"}), kinds
    stats = fuser.stats()
    assert stats["row_launches"] >= 2 and stats["interpreted_runs"] == 0, stats
    assert stats["cuda_cross_compile_failures"] == 0, stats


# Three results over a transposed product: the product itself (its rows side by side,
# as the inputs'), and two normalizations whose contiguous results transpose.
TILED = (
    "def f(x, y):\n"
    "    z = x * y\n"
    "    return z, torch.softmax(z, -1), torch.layer_norm(z, [z.size(-1)])\n"
)


def transposed_pair(
    rows: int, width: int, dtype: torch.dtype, device: str
) -> tuple[torch.Tensor, ...]:
    return tuple(
        torch.randn(2, width, rows, device=device).to(dtype).transpose(1, 2) for _ in range(2)
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("rows", [1, 15, 16, 17, 196, 1100])
@pytest.mark.parametrize("width", [1, 7, 16, 33])
def test_cpu_tiles_of_every_size(dtype: torch.dtype, rows: int, width: int) -> None:
    """Tiles of 16 elements of each row: rows and widths below, at and past a tile and
    a CPU block (1024 rows), in every dtype."""
    fuser.reset_stats()
    with fuser.enabled(True):
        compare(TILED, *transposed_pair(rows, width, dtype, "cpu"), dtype=dtype)
    stats = fuser.stats()
    assert stats["interpreted_runs"] == 0 and stats["cuda_cross_compile_failures"] == 0, stats


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_cpu_tiles_store_rows_through_transposes(dtype: torch.dtype) -> None:
    """timm's LayerNorm2d over 24 channels of 9 x 13 positions: whole tiles of 16
    channels leave through 8 x 8 transposes, 8 positions at a time; the 8 channels past
    the tile and the positions past a block's last square of 8 element by element. (The
    process's kernel sources hold the CPU form: one compiled by an earlier test and found
    in memory is not listed again.)"""
    text = (
        "def f(x, y):\n"
        "    z = torch.layer_norm((x - y).permute(0, 2, 3, 1), [24], None, None, 1e-5)\n"
        "    return z.permute(0, 3, 1, 2) * 1.5\n"
    )
    args = tuple(torch.randn(2, 24, 9, 13).to(dtype) for _ in range(2))
    fuser.reset_stats()
    with fuser.enabled(True):
        compare(text, *args, dtype=dtype)
    assert fuser.stats()["interpreted_runs"] == 0
    lane = "int" if dtype == torch.float32 else "short"
    assert any(f"fx_transpose8x8<{lane}>(fx_tile" in s for s in fuser.kernel_sources())


def compare_each_variant(text: str, *args: torch.Tensor, dtype: torch.dtype) -> int:
    """compare() with each of the column kernel's variants forced in turn (the test takes
    the variant_flags fixture, which restores the choice): its three vector widths, then
    its rows copied into shared memory where they fit (a forced index past the last
    candidate takes the last). Returns the launches of kernels in shared memory."""
    in_shared = 0
    for variant in range(4):
        fuser._C._set_variant_choice(False, variant)
        fuser.reset_stats()
        with fuser.enabled(True):
            compare(text, *args, dtype=dtype)
        stats = fuser.stats()
        assert stats["interpreted_runs"] == 0 and stats["row_launches"] >= 1, (variant, stats)
        assert stats["compile_failures"] == 0, (variant, stats)
        in_shared += stats["column_in_shared_launches"]
    return in_shared


CUDA_ONLY = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA's shared-memory tiles")


@CUDA_ONLY
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str
)
@pytest.mark.parametrize("rows", [1, 127, 128, 129, 300, 1568])
@pytest.mark.parametrize("width", [1, 63, 64, 65, 96, 200, 768])
def test_cuda_tiles_of_every_size(
    dtype: torch.dtype, rows: int, width: int, variant_flags: None
) -> None:
    """CUDA stores such results through tiles in shared memory: 32 elements of each of
    a block's 32 x vector rows, between barriers. Rows per batch item below, at and past
    a block of float32 rows at the widest vector (128), a thread's rows across two batch
    items (its block then stores element by element), the last block's rows past the
    end; widths below, at and past a step of 64 elements (then a step of 32, a whole
    tile, where one is left: 96; the rest of a row, fewer elements than a tile, is
    stored per row); every vector width."""
    compare_each_variant(TILED, *transposed_pair(rows, width, dtype, "cuda"), dtype=dtype)


def normalized_outputs(count: int) -> str:
    """`count` results of a transposed product's softmax (their rows apart), beside the
    product (its rows side by side)."""
    outs = ", ".join(f"s * {i + 1}.0" for i in range(count))
    return f"def f(x, y):\n    z = x * y\n    s = torch.softmax(z, -1)\n    return z, {outs}\n"


@pytest.mark.ptxas
@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str
)
@pytest.mark.parametrize("count", [2, 4, 6])
def test_tiles_shrink_to_fit_several_outputs(
    device: str, dtype: torch.dtype, count: int, variant_flags: None
) -> None:
    """Two, four and six outputs whose rows lie apart: CUDA's tiles hold 32, 16 and 8
    elements of each row so that they fit in shared memory (CPU: their CUDA forms
    compiled for sm_90 through ptxas, FUSER_CROSS_COMPILE)."""
    args = transposed_pair(300, 200, dtype, device)
    if device == "cuda":
        compare_each_variant(normalized_outputs(count), *args, dtype=dtype)
        return
    fuser.reset_stats()
    with fuser.enabled(True):
        compare(normalized_outputs(count), *args, dtype=dtype)
    stats = fuser.stats()
    assert stats["interpreted_runs"] == 0 and stats["cuda_cross_compile_failures"] == 0, stats


@pytest.mark.ptxas
@pytest.mark.parametrize("device", devices())
def test_tiles_of_many_outputs_fit_in_shared_memory(device: str) -> None:
    """Thirteen bool results of a float16 transposed softmax: at 8 rows a thread their
    tiles and row offsets took 52 KiB of a block's 48 KiB of static shared memory, so that
    kernel did not build (on CUDA the group then ran interpreted); tiles are now chosen
    with the row offsets counted."""
    count = 13
    text = (
        "def f(x):\n    s = torch.softmax(x, -1)\n    return "
        + ", ".join(f"s > {0.001 * (i + 1)}" for i in range(count))
        + "\n"
    )
    x = torch.randn(2, 256, 300, device=device, dtype=torch.float16).transpose(1, 2)
    fuser.reset_stats()
    with fuser.enabled(True):
        compare(text, x, dtype=torch.float16)
    stats = fuser.stats()
    assert stats["interpreted_runs"] == 0 and stats["row_launches"] >= 1, stats
    assert stats["cuda_cross_compile_failures"] == 0, stats


# Three column kernels over the channels of NCHW: statistics then the normalized values
# (ConvNeXt's channels-first LayerNorm written out), a softmax, and timm's LayerNorm2d
# (its result's rows apart).
CHANNEL_NORMS = (
    "def f(x, w):\n"
    "    u = x.mean(1, keepdim=True)\n"
    "    d = x - u\n"
    "    n = d / torch.sqrt((d * d).mean(1, keepdim=True) + 1e-6) * w\n"
    "    s = torch.softmax(x * 2.0, 1)\n"
    "    y = torch.layer_norm(x.permute(0, 2, 3, 1), [x.size(1)], w.flatten(), None, 1e-5)\n"
    "    t = y.permute(0, 3, 1, 2)\n"
    "    return n, s, t\n"
)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("channels", [8, 12, 29, 63, 64, 65, 96, 257, 700])
def test_normalizations_over_channels_of_every_width(
    device: str, dtype: torch.dtype, channels: int, variant_flags: None
) -> None:
    """Channels below, at and past a step of 64 elements, on CUDA with every vector
    width forced (CPU: their CUDA forms checked by NVRTC, FUSER_CROSS_COMPILE). A warp
    walks every eighth channel, 8 a step; what whole steps leave (1 to 7 channels here,
    and ConvNeXt's 96: 12 a warp) goes in a step of 4 where 4 or more are left, the rest
    one at a time; a tiled store (LayerNorm2d's) takes whole tiles of 32 first. Then
    with each thread's rows copied into shared memory first (every width here fits)."""
    x = torch.randn(3, channels, 5, 7, device=device, dtype=dtype)
    w = torch.randn(1, channels, 1, 1, device=device, dtype=dtype)
    if device == "cuda":
        in_shared = compare_each_variant(CHANNEL_NORMS, x, w, dtype=dtype)
        # x's copies: 128 bytes a channel (up to 96 KiB a block where the GPU takes them).
        if fuser._C._columns_in_shared_blocks(torch.cuda.current_device(), channels * 128, True):
            assert in_shared > 0
        return
    fuser.reset_stats()
    with fuser.enabled(True):
        compare(CHANNEL_NORMS, x, w, dtype=dtype)
    stats = fuser.stats()
    assert stats["interpreted_runs"] == 0 and stats["row_launches"] >= 1, stats
    assert stats["cuda_cross_compiles"] > 0 and stats["cuda_cross_compile_failures"] == 0, stats


@pytest.mark.skipif(
    os.environ.get("FUSER_CROSS_COMPILE") is None, reason="reads CUDA forms of CPU kernels"
)
def test_rows_in_shared_memory_store_whole_vectors_only_where_the_rows_are() -> None:
    """A CUDA column kernel that reads its rows from shared memory (each thread's copies
    of every input) still stores a thread's rows as one vector only where they are all
    rows and lie in one run: 35 positions per image, two rows a thread in float16, so
    one thread's pair crosses into the next image and the last thread holds one row. A
    vector store there would write the next image's value into another channel (or past
    the last row); such threads store per row. Read from the CUDA forms compiled on the
    CPU (FUSER_CROSS_COMPILE); the CUDA test above checks the values."""
    x = torch.randn(3, 64, 5, 7, dtype=torch.float16)
    w = torch.randn(1, 64, 1, 1, dtype=torch.float16)
    before = len(fuser.kernel_sources())
    with fuser.enabled(True):
        compare(CHANNEL_NORMS, x, w, dtype=torch.float16)
    in_shared = [s for s in fuser.kernel_sources()[before:] if "fx_dyn" in s]
    assert in_shared, "no CUDA form in shared memory was compiled"
    for s in in_shared:
        # The walks that store (their fx_side also asks the outputs); the others store
        # nothing and read every thread's rows as vectors.
        walk = r"fx_side_in = ([^;]*);[^\n]*\n\s*const bool fx_side = fx_side_in &&"
        storing = re.findall(walk, s)
        assert storing, "no storing walk"
        for side in storing:
            assert "fx_nb == 2" in side and "fx_r0 % fx_sizes[" in side, side


@CUDA_ONLY
@pytest.mark.parametrize("splits", [3], indirect=True)
def test_cuda_tiles_of_rows_cut_in_slices(splits: int, variant_flags: None) -> None:
    """Few long rows, cut in slices: each slice's tiled steps start where its own
    elements do."""
    for dtype in (torch.float32, torch.float16):
        compare_each_variant(TILED, *transposed_pair(40, 5001, dtype, "cuda"), dtype=dtype)


def test_cpu_tiles_of_many_outputs_fit_a_small_thread_stack() -> None:
    """Eight float64 results of a transposed softmax, on a thread of 1 MiB of stack:
    tiles of every output would take all of it (each 16 elements of 1024 rows), so a walk
    storing that many stores each element at its own row's offset instead."""
    text = (
        "def f(x):\n    s = torch.softmax(x * 2.0, -1)\n    return "
        + ", ".join(f"s + {i}.0" for i in range(8))
        + "\n"
    )
    x = torch.randn(40, 5000, dtype=torch.float64).t()
    results: list[object] = []

    def run() -> None:
        try:
            with fuser.enabled(True):
                results.append(compare(text, x, dtype=torch.float64))
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            results.append(e)

    threads = torch.get_num_threads()
    old_size = threading.stack_size(1 << 20)
    try:
        torch.set_num_threads(1)  # the kernel runs on the calling thread
        fuser.reset_stats()
        worker = threading.Thread(target=run)
        worker.start()
        worker.join()
    finally:
        threading.stack_size(old_size)
        torch.set_num_threads(threads)
    assert len(results) == 1 and not isinstance(results[0], BaseException), results
    stats = fuser.stats()
    assert stats["row_launches"] >= 2 and stats["interpreted_runs"] == 0, stats


# Rows that are runs in the input (the reduced dims innermost in memory) but not in the
# contiguous result: a row kernel stores whole outputs as runs only, so these stay with
# ATen rather than form groups that would run interpreted.
RUNS_IN_THE_INPUT = {
    "softmax_channels_last": (
        "def f(x):\n    return torch.softmax(x * 2.0, 1)\n",
        lambda: torch.randn(2, 8, 5, 6).contiguous(memory_format=torch.channels_last),
    ),
    "softmax_dim0_of_a_transpose": (
        "def f(x):\n    return torch.softmax(x * 2.0, 0)\n",
        lambda: torch.randn(30, 17).t(),
    ),
    "softmax_over_a_middle_unit_stride_dim": (
        "def f(x):\n    return torch.log_softmax(x * 2.0, 1)\n",
        lambda: torch.randn(4, 5, 17).transpose(1, 2),
    ),
    "layer_norm_over_two_transposed_dims": (
        "def f(x):\n    return torch.layer_norm(x * 2.0, [17, 5])\n",
        lambda: torch.randn(4, 5, 17).transpose(1, 2),
    ),
    "layer_norm_channels_last_chw": (
        "def f(x):\n    return torch.layer_norm(x * 2.0, [8, 5, 6])\n",
        lambda: torch.randn(2, 8, 5, 6).contiguous(memory_format=torch.channels_last),
    ),
}


@pytest.mark.parametrize("case", sorted(RUNS_IN_THE_INPUT))
def test_rows_that_are_runs_only_in_the_input_never_run_interpreted(case: str) -> None:
    text, make = RUNS_IN_THE_INPUT[case]
    x = make()
    fuser.reset_stats()
    with fuser.enabled(True):
        compare(text, x)
    stats = fuser.stats()
    assert stats["interpreted_runs"] == 0, stats
