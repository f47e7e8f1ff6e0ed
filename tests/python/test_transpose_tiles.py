"""Groups whose inputs disagree with the output on the fastest-moving dim (a transpose,
a permute, channels-last beside row-major) walk the two innermost dims in tiles
(codegen::Kernel::transpose_tiles): CUDA stages the transposed inputs through shared
memory, the CPU walks bands of rows. Values, shapes and strides equal eager's at ragged
sizes, in every dtype; the tile path is the one taken (fuser.stats()'s
tiled_launches); on CPU runs with FUSER_CROSS_COMPILE its CUDA form compiles too."""

from __future__ import annotations

import os

import pytest
import torch

import fuser
from helpers import devices, eager_from_source, run_optimized, run_python, script_from_source

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32]


def tensor(shape: tuple[int, ...], dtype: torch.dtype, device: str) -> torch.Tensor:
    if dtype == torch.int32:
        return torch.randint(-50, 50, shape, dtype=dtype, device=device)
    return torch.randn(shape, device=device).to(dtype)


def run_and_compare(source: str, *args: torch.Tensor) -> int:
    """Runs `source` fused and eager; checks every output; returns how many of the
    fused calls launched a tiled kernel."""
    before = fuser.stats()
    failures = before["cuda_cross_compile_failures"]
    got = run_optimized(script_from_source(source), *args)
    want = eager_from_source(source)(*args)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, source
        assert g.stride() == w.stride(), (source, g.stride(), w.stride())
        torch.testing.assert_close(g, w, equal_nan=True)
    after = fuser.stats()
    assert after["cuda_cross_compile_failures"] == failures
    assert after["kernel_launches"] > before["kernel_launches"], "nothing ran fused"
    return after["tiled_launches"] - before["tiled_launches"]


def assert_tiled(tiled_launches: int, tiled: bool = True) -> None:
    assert (tiled_launches > 0) == tiled


TRANSPOSE = "def f(x, y):\n    return (x.t() * y + 1.0).relu()\n"


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
# 512 rows: columns 512 elements apart, a multiple of 1 KB (the case the CPU buffer is for).
@pytest.mark.parametrize("rows,cols", [(32, 32), (33, 65), (100, 37), (257, 129), (512, 40)])
def test_transpose_at_ragged_sizes(fused, device: str, dtype: torch.dtype, rows: int, cols: int):
    x, y = tensor((cols, rows), dtype, device), tensor((rows, cols), dtype, device)
    assert_tiled(run_and_compare(TRANSPOSE, x, y))


@pytest.mark.parametrize("device", devices())
def test_dims_shorter_than_a_tile_take_the_row_path(fused, device: str):
    x, y = torch.randn(64, 31, device=device), torch.randn(31, 64, device=device)
    assert_tiled(run_and_compare(TRANSPOSE, x, y), tiled=False)


CASES = {
    # A batch of transposes: the outer dim walks whole tiles.
    "batched": (
        "def f(x, y):\n    return x.transpose(1, 2) * y - 2.0\n",
        [(3, 70, 45), (3, 45, 70)],
    ),
    # NCHW read as NHWC beside a row-major NHWC tensor.
    "permute_nhwc": (
        "def f(x, y):\n    return (x.permute(0, 2, 3, 1) + y).sigmoid()\n",
        [(2, 40, 6, 7), (2, 6, 7, 40)],
    ),
    # Two transposed inputs beside the row-major one the outputs follow, one input
    # broadcast along the rows, and two outputs.
    "two_transposed_and_a_bias": (
        "def f(y, a, b, bias):\n    s = y + a.t() * b.t() + bias\n    return s.relu(), s * a.t()\n",
        [(80, 48), (48, 80), (48, 80), (48,)],
    ),
    # Chunks of a transposed tensor: two transposed inputs with equal strides.
    "chunks": (
        "def f(x, y):\n    a, b = x.t().chunk(2, 1)\n    return a * b + y\n",
        [(96, 40), (40, 48)],
    ),
    # A sliced transpose: unit stride along t, its rows 2 elements further apart.
    "sliced": (
        "def f(x, y):\n    return x[:, 2:].t() * y\n",
        [(50, 40), (38, 50)],
    ),
    # An odd number of rows t with strides a multiple of 4: 16-bit vector tiles end in a
    # slot of one element.
    "odd_rows_even_strides": (
        "def f(x, y):\n    return x[:, :33].t() * y + 1.0\n",
        [(64, 36), (33, 64)],
    ),
    # Strides even but not a multiple of 4: 16-bit tiles go one element per lane.
    "strides_of_two_mod_four": (
        "def f(x, y):\n    return x[:, :40].t() * y + 1.0\n",
        [(64, 42), (40, 64)],
    ),
    # Starting one element in: 16-bit pairs would be misaligned, so elements are read
    # one by one.
    "misaligned": (
        "def f(x, y):\n    return x[:, 1:].t() - y\n",
        [(70, 41), (40, 70)],
    ),
}


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("name", sorted(CASES))
def test_transposed_layouts_match_eager(fused, device: str, dtype: torch.dtype, name: str):
    source, shapes = CASES[name]
    args = [tensor(shape, dtype, device) for shape in shapes]
    assert_tiled(run_and_compare(source, *args))


@pytest.mark.parametrize("device", devices())
def test_16_bit_transposed_beside_doubles(fused, device: str):
    # 8-byte neighbours take 16 bytes per access: two elements per lane, not four.
    x = torch.randn(96, 72, device=device).half()
    y = torch.randn(72, 96, dtype=torch.float64, device=device)
    source = "def f(x, y):\n    return x.t() * y - 1.0\n"
    assert_tiled(run_and_compare(source, x, y))


@pytest.mark.parametrize("device", devices())
def test_transposed_bool_mask(fused, device: str):
    mask = torch.randn(72, 40, device=device) > 0
    y = torch.randn(40, 72, device=device)
    source = "def f(m, y):\n    return torch.where(m.t(), y * 2.0, -y)\n"
    assert_tiled(run_and_compare(source, mask, y))


@pytest.mark.ptxas
@pytest.mark.parametrize("device", devices())
def test_more_transposed_inputs_than_tiles_fit(fused, device: str):
    # Twelve float64 tiles would need 110 KB of shared memory: some are read directly.
    names = [f"x{i}" for i in range(12)]
    body = " + ".join(f"{n}.t() * {0.5 + i}" for i, n in enumerate(names))
    source = f"def f(y, {', '.join(names)}):\n    return y + {body}\n"
    args = [torch.randn(40, 70, dtype=torch.float64, device=device)]
    args += [torch.randn(70, 40, dtype=torch.float64, device=device) for _ in names]
    assert_tiled(run_and_compare(source, *args))


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_channels_last_beside_row_major(fused, device: str, dtype: torch.dtype):
    activation = tensor((2, 64, 9, 11), dtype, device).contiguous(memory_format=torch.channels_last)
    residual = tensor((2, 64, 9, 11), dtype, device)
    source = "def f(a, r):\n    return (a + r).relu(), a * 2.0\n"
    # Eager's output follows the first input: either one is the transposed read.
    assert_tiled(run_and_compare(source, activation, residual))
    assert_tiled(run_and_compare(source, residual, activation))


@pytest.mark.ptxas
@pytest.mark.skipif(os.environ.get("FUSER_CROSS_COMPILE") is None, reason="no NVRTC here")
def test_cuda_form_of_a_tiled_kernel_compiles(fused):
    x, y = torch.randn(96, 64, dtype=torch.float16), torch.randn(64, 96, dtype=torch.float16)
    compiles = fuser.stats()["cuda_cross_compiles"]
    assert_tiled(run_and_compare(TRANSPOSE, x, y))
    assert fuser.stats()["cuda_cross_compiles"] > compiles


@pytest.mark.skipif(os.environ.get("FUSER_CROSS_COMPILE") is None, reason="no NVRTC here")
def test_float32_pair_tiles_cap_their_registers_in_2d_kernels_only(fused):
    # codegen::tileMinBlocksPerSm: one transposed float32 input in a 2-D kernel asks
    # ptxas for 4 blocks per SM (the H200's float32 transpose at the copy bandwidth);
    # with an outer dim (a channels-last residual add: N, C, H x W) the kernel was
    # slower under that cap (96.2 -> 126.5 us), so it asks for none. Read from the CUDA
    # forms of the CPU kernels.
    def cuda_forms_of(source: str, *args: torch.Tensor) -> list[str]:
        before = len(fuser.kernel_sources())
        assert_tiled(run_and_compare(source, *args))
        return [k for k in fuser.kernel_sources()[before:] if "__global__" in k]

    x, y = torch.randn(96, 64), torch.randn(64, 96)
    (transpose,) = cuda_forms_of("def f(x, y):\n    return (x.t() * y + 0.75).relu()\n", x, y)
    assert "FxVec<float, 2>" in transpose and "__launch_bounds__(256, 4)" in transpose
    # The row-major tensor first: the output follows it, the channels-last one is read
    # through the tiles.
    row_major = torch.randn(2, 64, 8, 40)
    channels_last = torch.randn(2, 64, 8, 40).contiguous(memory_format=torch.channels_last)
    source = "def f(r, a):\n    return (r + a * 0.75).relu()\n"
    (residual,) = cuda_forms_of(source, row_major, channels_last)
    assert "FxVec<float, 2>" in residual and "__launch_bounds__(256)" in residual


def test_flag_turns_tiles_off():
    code = """
import torch, fuser
fuser.enable()
@torch.jit.script
def f(x, y):
    return (x.t() * y + 1.0).relu()
x, y = torch.randn(64, 96), torch.randn(96, 64)
for _ in range(3):
    out = f(x, y)
torch.testing.assert_close(out, (x.t() * y + 1.0).relu())
stats = fuser.stats()
print(stats["kernel_launches"] > 0, stats["tiled_launches"])
"""
    for flag, tiled in (("0", "0"), ("1", "2")):
        result = run_python(code, {"FUSER_TRANSPOSE_TILES": flag})
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == ["True", tiled], flag


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("min_blocks", ["0", "1", "5"])
def test_register_caps_keep_results(min_blocks: str):
    # FUSER_TILE_MIN_BLOCKS: the tile kernels' register cap (0: chosen, 4 blocks for
    # 16-bit vector tiles and 2-D float32 ones; 1: none; 5 forced on every tile kernel,
    # which then spill).
    # Large ragged tensors, aligned (vector tiles) and offset by one element (one
    # element per lane, the path that spills most under the cap), 2-D and an NCHW
    # input read as NHWC.
    code = """
import torch, fuser
fuser.enable()
@torch.jit.script
def f(x, y):
    return (x.t() * y + 1.0).relu()
@torch.jit.script
def g(x, y):
    return (x.permute(0, 2, 3, 1) + y).relu()
for dtype in (torch.float32, torch.float16):
    for shift in (0, 1):
        x = torch.randn(2100 * 2100 + shift, device="cuda").to(dtype)[shift:].view(2100, 2100)
        y = torch.randn(2100, 2100, device="cuda").to(dtype)
        for _ in range(3):
            out = f(x, y)
        torch.testing.assert_close(out, (x.t() * y + 1.0).relu())
        x = torch.randn(40 * 70 * 33 * 40 + shift, device="cuda").to(dtype)[shift:]
        x = x.view(40, 70, 33, 40)
        y = torch.randn(40, 33, 40, 70, device="cuda").to(dtype)
        for _ in range(3):
            out = g(x, y)
        torch.testing.assert_close(out, (x.permute(0, 2, 3, 1) + y).relu())
print(fuser.stats()["tiled_launches"])
"""
    result = run_python(code, {"FUSER_TILE_MIN_BLOCKS": min_blocks})
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.split()[-1]) >= 8, result.stdout


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("side, group", [("32", "1"), ("64", "1"), ("32", "3"), ("64", "8")])
def test_tile_flags_keep_results(device: str, side: str, group: str):
    # FUSER_TILE_SIDE forces one side for every dtype and FUSER_TILE_GROUP reorders the
    # tiles (for measuring one against the other); ragged sizes leave partial tiles and
    # a partial last group. On CPU, the CUDA form of each kernel compiles where NVRTC is.
    code = f"""
import torch, fuser
fuser.enable()
@torch.jit.script
def f(x, y):
    return (x.t() * y + 1.0).relu()
for dtype in (torch.float32, torch.float16, torch.float64):
    x = torch.randn(230, 300, device="{device}").to(dtype)
    y = torch.randn(300, 230, device="{device}").to(dtype)
    for _ in range(3):
        out = f(x, y)
    torch.testing.assert_close(out, (x.t() * y + 1.0).relu())
s = fuser.stats()
print(s["tiled_launches"], s["cuda_cross_compiles"], s["cuda_cross_compile_failures"])
"""
    env = {"FUSER_TILE_SIDE": side, "FUSER_TILE_GROUP": group}
    cross = device == "cpu" and fuser._C.nvrtc_available()[0]
    if cross:
        env["FUSER_CROSS_COMPILE"] = "sm_90"
    result = run_python(code, env)
    assert result.returncode == 0, result.stderr
    tiled, compiles, failures = (int(v) for v in result.stdout.split()[-3:])
    assert tiled >= 3, result.stdout
    assert failures == 0, result.stderr
    assert compiles >= 3 or not cross
