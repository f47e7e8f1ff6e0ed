"""The CUDA printer checked without a GPU (csrc/codegen/cuda_printer.cpp): kernels for
every dtype, both loop shapes, compiled by NVRTC for sm_90. With conftest's
FUSER_CROSS_COMPILE, test_ops.py checks the CUDA form of every op's kernel too (NVRTC's
front end; through ptxas for tests marked `ptxas`)."""

import json
import os
import re

import pytest
import torch

import fuser
from fuser import _C
from helpers import run_python

nvrtc_ok, nvrtc_why = _C.nvrtc_available()
needs_nvrtc = pytest.mark.skipif(not nvrtc_ok, reason=f"NVRTC not found: {nvrtc_why}")

CHAIN = torch._C.parse_ir(
    """
graph(%x : Tensor, %y : Tensor, %s : float):
  %one : int = prim::Constant[value=1]()
  %m : Tensor = aten::mul(%x, %y)
  %a : Tensor = aten::add(%m, %s, %one)
  %r : Tensor = aten::relu(%a)
  %none : str = prim::Constant[value="none"]()
  %g : Tensor = aten::gelu(%r, %none)
  %o : Tensor = aten::sigmoid(%g)
  return (%o, %m)
"""
)

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.uint8]


@needs_nvrtc
@pytest.mark.parametrize("layout", ["flat", "strided", "rows", "broadcast_rows", "fixed_rows"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_chain_compiles_for_sm90(dtype, layout):
    source = _C.kernel_source(CHAIN, [dtype, torch.float32, float], [False, True], "cuda", layout)
    assert "__global__" in source
    image = _C.nvrtc_compile(source, 9, 0)
    assert image[:4] == b"\x7fELF"
    # Dense rows get the vector row loop (guarded by a run-time alignment check).
    assert ("fx_inner % " in source) == (layout in ("rows", "broadcast_rows", "fixed_rows"))


@needs_nvrtc
def test_compile_error_carries_nvrtc_log():
    with pytest.raises(ValueError, match="error"):
        _C.nvrtc_compile('extern "C" __global__ void k() { undefined_thing(); }', 9, 0)


# 64 KiB of static shared memory: past the 48 KiB a kernel may declare, which ptxas
# enforces and NVRTC's front end does not.
OVERSIZED_SHARED = """
extern "C" __global__ void k(float* out) {
  __shared__ float tile[16384];
  tile[threadIdx.x] = out[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = tile[(threadIdx.x + 1) % 16384];
}
"""


@needs_nvrtc
def test_front_end_check_rejects_bad_source_but_not_what_ptxas_limits():
    """FUSER_CROSS_COMPILE=sm_90:front (the tests' default depth) runs NVRTC's front end
    only: it rejects what does not parse or type-check, while limits of ptxas need the
    full depth, which the tests marked `ptxas` take."""
    with pytest.raises(ValueError, match="undefined_thing"):
        _C.nvrtc_check_syntax('extern "C" __global__ void k() { undefined_thing(); }', 9, 0)
    with pytest.raises(ValueError, match="float"):
        _C.nvrtc_check_syntax('extern "C" __global__ void k(float* p) { int* q = p; }', 9, 0)
    source = _C.kernel_source(
        CHAIN, [torch.float16, torch.float32, float], [False, True], "cuda", "rows"
    )
    _C.nvrtc_check_syntax(source, 9, 0)
    _C.nvrtc_check_syntax(OVERSIZED_SHARED, 9, 0)
    with pytest.raises(ValueError, match="shared"):
        _C.nvrtc_compile(OVERSIZED_SHARED, 9, 0)


@needs_nvrtc
@pytest.mark.parametrize("flag", ["sm_90", "sm_90:front", "sm_90:fast", "sm_90:"])
def test_cross_compile_depth_from_the_environment(flag):
    """Both depths cross-compile a CPU kernel's CUDA form; a depth not understood warns
    and turns cross-compiling off."""
    code = """
import json, torch, fuser
fuser.enable()
@torch.jit.script
def f(x, y):
    return (x * y + 0.625).relu().sigmoid()
x, y = torch.randn(32, 32), torch.randn(32, 32)
for _ in range(3):
    f(x, y)
s = fuser.stats()
front_only = fuser._C._set_cross_compile_front_only(False)
print(json.dumps([s["cuda_cross_compiles"], s["cuda_cross_compile_failures"], front_only]))
"""
    # No disk cache: a form checked before would not reach NVRTC.
    result = run_python(code, {"FUSER_CROSS_COMPILE": flag, "FUSER_DISK_CACHE": "0"})
    assert result.returncode == 0, result.stderr
    compiles, failures, front_only = json.loads(result.stdout.strip().splitlines()[-1])
    understood = flag in ("sm_90", "sm_90:front")
    assert failures == 0 and (compiles > 0) == understood, (compiles, result.stderr)
    assert front_only == (flag == "sm_90:front")
    assert ("not understood" in result.stderr) == (not understood), result.stderr


def _front_only_now() -> bool:
    front_only = _C._set_cross_compile_front_only(False)
    _C._set_cross_compile_front_only(front_only)
    return front_only


@pytest.mark.ptxas
def test_tests_marked_ptxas_cross_compile_through_ptxas():
    assert not _front_only_now()


@pytest.mark.skipif(
    not os.environ.get("FUSER_CROSS_COMPILE", "").endswith(":front"),
    reason="the session's FUSER_CROSS_COMPILE is not the front-end depth",
)
def test_other_tests_take_the_sessions_front_end_depth():
    assert _front_only_now()


@needs_nvrtc
def test_cross_compile_hook_ran_in_this_session():
    if os.environ.get("FUSER_CROSS_COMPILE") is None:
        pytest.skip("FUSER_CROSS_COMPILE not set for this session")
    fn = torch.jit.CompilationUnit("def f(x, y):\n    return (x * y + 2).tanh()\n").f
    before = fuser.stats()["cuda_cross_compiles"]
    with fuser.enabled(True):
        for _ in range(3):
            fn(torch.randn(7, 3), torch.randn(3))
    assert fuser.stats()["cuda_cross_compiles"] > before
    assert fuser.stats()["cuda_cross_compile_failures"] == 0


RELU_OF_PRODUCT = torch._C.parse_ir(
    """
graph(%x : Tensor, %y : Tensor):
  %m : Tensor = aten::mul(%x, %y)
  %r : Tensor = aten::relu(%m)
  %n : Tensor = aten::neg(%r)
  return (%n)
"""
)


@pytest.mark.parametrize(
    "dtype, rounding",
    [(torch.float16, "fx_round_h("), (torch.bfloat16, "fx_bf2f(fx_f2bf(")],
    ids=["float16", "bfloat16"],
)
def test_half_results_are_rounded_once_per_inexact_op(dtype, rounding):
    # mul is rounded like eager; relu and neg of a rounded value are exact, so they are
    # not rounded again, and the store's own conversion replaces the last rounding.
    source = _C.kernel_source(RELU_OF_PRODUCT, [dtype, dtype], [False, False], "cpp", "flat")
    kernel = source[source.rindex('extern "C"') :]  # the kernel, not the prelude
    assert kernel.count(rounding) == 1


def _sum_of(count: int) -> torch._C.Graph:
    """A graph adding `count` tensors: a kernel reading `count` inputs."""
    params = ", ".join(f"%x{i} : Tensor" for i in range(count))
    lines = ["  %one : int = prim::Constant[value=1]()", "  %s0 : Tensor = aten::mul(%x0, %x0)"]
    for i in range(1, count):
        lines.append(f"  %s{i} : Tensor = aten::add(%s{i - 1}, %x{i}, %one)")
    return torch._C.parse_ir(
        f"graph({params}):\n" + "\n".join(lines) + f"\n  return (%s{count - 1})\n"
    )


@pytest.mark.parametrize(
    "inputs, dtype, loop",
    [
        (2, torch.float32, "fx_jk[4]"),
        (3, torch.float32, "fx_jk[2]"),
        (3, torch.float64, "fx_jk[2]"),
        (5, torch.float32, "fx_jk[2]"),
        (6, torch.float32, "fx_jk[1]"),
        (7, torch.float32, "fx_jk[1]"),
        (8, torch.float32, None),
        (17, torch.float32, None),
        (2, torch.float16, "fx_jk[2]"),
    ],
    ids=[
        "four",
        "two",
        "doubles_two",
        "two_at_the_limit",
        "one",
        "one_at_the_limit",
        "elements",
        "lstm_like",
        "half",
    ],
)
def test_row_tiles_hold_at_most_twelve_vectors_per_thread(inputs, dtype, loop):
    # Each vector a thread holds costs 4 registers: with u vectors per tile a thread
    # holds (inputs + outputs) + inputs x (u - 1), at most 12; past 8 with one each the
    # rows go element-wise (an LSTM cell's kernel then runs at four times the occupancy).
    # Float rows that could not hold four take two at most (floatRowKernel: blocks of 128).
    dtypes = [dtype] * inputs
    source = _C.kernel_source(_sum_of(inputs), dtypes, [False] * inputs, "cuda", "rows")
    if loop is None:
        assert "fx_jk" not in source and "fx_ld_vec<" not in source
    else:
        assert loop in source


@needs_nvrtc
def test_kernel_for_one_shape_has_its_sizes_and_strides_as_constants():
    # 5 rows of 300 of x and y, the two chunks of one (5, 600) tensor (kernel_source.h):
    # nothing of the shape is read from the arguments, so NVRTC folds the index math,
    # and y is read through x's pointer, the chunk's start folded into the load.
    source = _C.kernel_source(
        CHAIN, [torch.float32, torch.float32, float], [False, False], "cuda", "fixed_rows"
    )
    body = source[source.index("__global__") :]
    assert "a.sizes" not in body and "a.st" not in body and "a.numel" not in body
    assert "fx_numel = (idx_t)1500;" in body
    assert "fx_inner = (idx_t)300;" in body and "fx_vectors = (idx_t)1;" in body
    assert "(idx_t)600" in body  # the outer stride, in the row offsets
    assert "fx_ld((a.in0 + 300) + off1)" in body and "a.in1" not in body
    assert _C.nvrtc_compile(source, 9, 0)[:4] == b"\x7fELF"


@needs_nvrtc
def test_inputs_with_equal_strides_share_one_offset():
    # Chunks of one tensor step alike: the kernel computes the first one's offsets and
    # reads the others through them.
    source = _C.kernel_source(_sum_of(5), [torch.float32] * 5, [False] * 5, "cuda", "shared_rows")
    assert "base_off0" in source and "base_off1" not in source
    assert "a.in4 + off0" in source  # element path
    assert "int64_t st0[2];" in source and "st1" not in source  # one stride row in FxArgs
    assert _C.nvrtc_compile(source, 9, 0)[:4] == b"\x7fELF"


@needs_nvrtc
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_flat_kernels_moving_16_bytes_per_thread_run_in_blocks_of_1024(dtype):
    # Every dtype moves 16 bytes per access (cudaVectorWidth).
    source = _C.kernel_source(_sum_of(2), [dtype, dtype], [False, False], "cuda", "flat")
    assert "__launch_bounds__(1024)" in source
    assert _C.nvrtc_compile(source, 9, 0)[:4] == b"\x7fELF"


@needs_nvrtc
@pytest.mark.parametrize(
    "dtypes, tile, slot",
    [
        ([torch.float32, torch.float32], "[64][65]", "FxVec<float, 2>"),
        ([torch.int32, torch.int32], "[64][65]", "FxVec<int32_t, 2>"),
        ([torch.float16, torch.float16], "[64][66]", "uint4"),  # eight per lane
        ([torch.float32, torch.bfloat16], "[64][66]", "uint2"),  # the float read as 4 too
        ([torch.float64, torch.bfloat16], "[64][66]", "uint32_t"),  # 16 bytes of doubles: 2
        ([torch.float16, torch.float16, torch.float32], "[64][66]", "uint32_t"),  # a float beside
        ([torch.uint8, torch.uint8], "[32][36]", None),
        ([torch.float64, torch.float64], "[32][33]", None),
        ([torch.int32, torch.float64, torch.int32], "[32][33]", None),
    ],
    ids=str,
)
def test_tiles_of_2_and_4_byte_inputs_take_vectors(dtypes, tile, slot):
    # Rows padded to an odd number of 4-byte words. 2- and 4-byte transposed inputs take
    # tiles of 64 with a path of 16 bytes (2-byte elements alone) or 8 bytes per lane and
    # access along the transposed inputs (at most 16 along the others), tile slots
    # swizzled by row, taken when pointers and strides allow it; 2-byte slots are held as
    # words. The rest keep tiles of 32.
    source = _C.kernel_source(_sum_of(len(dtypes)), dtypes, [False] * len(dtypes), "cuda", "tiles")
    assert f"fx_tile1{tile}" in source
    if slot is None:
        assert "fx_vt1" not in source and "fx_ld_vec<FxVec<" not in source
    else:
        assert f"{slot}* fx_vt1" in source
    assert _C.nvrtc_compile(source, 9, 0)[:4] == b"\x7fELF"


@needs_nvrtc
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.uint8, torch.float64])
def test_forced_tiles_of_64_take_vectors_for_2_and_4_byte_elements(dtype):
    # FUSER_TILE_SIDE=64 (layout "tiles64"): 1- and 8-byte elements go one per lane.
    source = _C.kernel_source(_sum_of(2), [dtype, dtype], [False, False], "cuda", "tiles64")
    assert ("fx_vt1" in source) == (dtype in (torch.float32, torch.float16))
    assert "fx_tile1[64]" in source
    assert _C.nvrtc_compile(source, 9, 0)[:4] == b"\x7fELF"


@needs_nvrtc
def test_row_loops_compute_per_row_values_once_per_row():
    # y is broadcast along the rows (batch_norm's per-channel statistics are): exp(y) is
    # computed where the row's offsets are known, before the loop over a vector's lanes,
    # while x * exp(y) stays per element. Short rows' vector loop does the same per vector.
    graph = torch._C.parse_ir(
        """
graph(%x : Tensor, %y : Tensor):
  %e : Tensor = aten::exp(%y)
  %m : Tensor = aten::mul(%x, %e)
  return (%m)
"""
    )
    source = _C.kernel_source(
        graph, [torch.float32, torch.float32], [False, False], "cuda", "broadcast_rows"
    )
    vector_paths = source.split("fx_inner % ")[1:]
    assert len(vector_paths) == 2  # long rows, short rows
    for path in vector_paths:
        body = path[: path.index("fx_jk[fx_k]) = s0;")]  # up to the vector's store
        lanes = body.index("for (int u = 0;")
        assert body.index("fx_expf(v1)") < lanes and body.count("fx_expf") == 1
        assert "(v0 * v2)" in body[lanes:]
    assert _C.nvrtc_compile(source, 9, 0)[:4] == b"\x7fELF"


@needs_nvrtc
@pytest.mark.parametrize(
    "dtypes, bound",
    [
        ([torch.float16, torch.float16], "256, 4"),
        ([torch.bfloat16, torch.bfloat16], "256, 4"),
        ([torch.float32, torch.float16], "256, 5"),
        ([torch.float32, torch.float32], "256, 4"),
        ([torch.float16, torch.float16, torch.float16], "256"),
        ([torch.float64, torch.float16], "256"),
        ([torch.float64, torch.float32], "256"),
    ],
    ids=str,
)
def test_vector_tiles_cap_their_registers(dtypes, bound):
    # One transposed 2-byte input in vector tiles: 4 resident blocks per SM asked of
    # ptxas with eight elements per lane (64 registers), 5 with four (a float beside:
    # 48), where unbounded the one-element path had set 80. One transposed float32
    # input (pairs) at 4, where ptxas left two; two transposed inputs and 8-byte
    # tensors keep no bound.
    source = _C.kernel_source(_sum_of(len(dtypes)), dtypes, [False] * len(dtypes), "cuda", "tiles")
    assert f"__launch_bounds__({bound})" in source
    assert _C.nvrtc_compile(source, 9, 0)[:4] == b"\x7fELF"


TANH_GELU = """
graph(%x : Tensor):
  %tanh : str = prim::Constant[value="tanh"]()
  %g : Tensor = aten::gelu(%x, %tanh)
  return (%g)
"""
SIGMOID_CHAIN = """
graph(%x : Tensor, %y : Tensor):
  %one : int = prim::Constant[value=1]()
  %m : Tensor = aten::mul(%x, %y)
  %a : Tensor = aten::add(%m, %one, %one)
  %r : Tensor = aten::relu(%a)
  %s : Tensor = aten::sigmoid(%r)
  return (%s)
"""


@pytest.mark.parametrize(
    "ir, arity, dtype, block",
    [
        (TANH_GELU, 1, torch.float16, 256),
        (SIGMOID_CHAIN, 2, torch.float16, 1024),
        (SIGMOID_CHAIN, 2, torch.float32, 1024),  # four floats per access (cudaVectorWidth)
    ],
    ids=["tanh_gelu_bound_by_math", "sigmoid_chain_at_copy_speed", "float_sigmoid_chain"],
)
def test_flat_kernels_bound_by_math_take_blocks_of_256(ir, arity, dtype, block):
    graph = torch._C.parse_ir(ir)
    source = _C.kernel_source(graph, [dtype] * arity, [False] * arity, "cuda", "flat")
    assert f"__launch_bounds__({block})" in source
    if dtype == torch.float32:
        assert "FxVec<float, 4>" in source


ERF_GELU_OF_SUM = """
graph(%x : Tensor, %b : Tensor):
  %one : int = prim::Constant[value=1]()
  %none : str = prim::Constant[value="none"]()
  %s : Tensor = aten::add(%x, %b, %one)
  %g : Tensor = aten::gelu(%s, %none)
  return (%g)
"""


@needs_nvrtc
@pytest.mark.parametrize(
    "graph, dtype, bound, vectors",
    [
        (ERF_GELU_OF_SUM, torch.float32, "128, 16", 2),
        (4, torch.float32, "128", 2),
        (2, torch.float32, "256", 4),
        (ERF_GELU_OF_SUM, torch.float16, "256", 2),
        (ERF_GELU_OF_SUM, torch.float64, "256", 4),
    ],
    ids=["float_gelu_capped", "float_sum_of_four", "float_sum_of_two", "half_gelu", "double_gelu"],
)
def test_float_row_blocks_vectors_and_register_cap(graph, dtype, bound, vectors):
    # Rows of floats with an erf per element: blocks of 128 threads, two vectors each,
    # 16 resident blocks asked for (32 registers). A sum of four rows (a thread could not
    # hold four vectors of each): blocks of 128 without the cap. A sum of two keeps
    # blocks of 256 and four vectors, as other dtypes keep 256 without a cap.
    graph = torch._C.parse_ir(graph) if isinstance(graph, str) else _sum_of(graph)
    arity = len(list(graph.inputs()))
    source = _C.kernel_source(graph, [dtype] * arity, [False] * arity, "cuda", "rows")
    assert f"__launch_bounds__({bound}) " in source
    assert f"fx_jk[{vectors}]" in source
    assert _C.nvrtc_compile(source, 9, 0)[:4] == b"\x7fELF"


@needs_nvrtc
def test_cuda_row_forms_take_four_lane_counts_in_blocks_of_whole_rows():
    """A float row of 1024 is timed at 32, 64, 128 and 256 lanes (cudaRowShapeCandidates:
    the heuristic's 64, half, twice and four times); a block takes its own rows, at least
    64 threads (cudaRowBlock), so 32-lane rows go two to a block."""
    if os.environ.get("FUSER_CROSS_COMPILE") is None:
        pytest.skip("FUSER_CROSS_COMPILE not set for this session")
    # A constant of its own keeps the kernel text apart from other tests' (a source the
    # process compiled before is found in memory and not listed again).
    fn = torch.jit.CompilationUnit(
        "def f(x, w, b):\n    return torch.layer_norm(x * 1.8125, [1024], w, b, 0.000375)\n"
    ).f
    x, w, b = torch.randn(64, 1024), torch.randn(1024), torch.randn(1024)
    before = len(fuser.kernel_sources())
    failures = fuser.stats()["cuda_cross_compile_failures"]
    with fuser.enabled(True):
        for _ in range(3):
            out = fn(x, w, b)
    assert fuser.stats()["cuda_cross_compile_failures"] == failures
    torch.testing.assert_close(out, torch.layer_norm(x * 1.8125, [1024], w, b, 0.000375))
    forms = [s for s in fuser.kernel_sources()[before:] if "__global__" in s and "fuser_rows" in s]
    shapes = set()
    for source in forms:
        lanes = int(re.search(r"const int fx_lane = threadIdx\.x % (\d+);", source).group(1))
        block = int(re.search(r"__launch_bounds__\((\d+)\)", source).group(1))
        rows = int(re.search(r"fx_r = \(int64_t\)blockIdx\.x \* (\d+) \+", source).group(1))
        shapes.add((lanes, block, rows))
    assert shapes == {(32, 64, 2), (64, 64, 1), (128, 128, 1), (256, 256, 1)}, shapes
