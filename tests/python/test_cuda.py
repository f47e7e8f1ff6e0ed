"""Scripted functions on CUDA tensors, end to end (csrc/runtime/cuda/): skipped cleanly
without a GPU; run on the device machine (tools/device_run.sh)."""

import os

import pytest
import torch

import fuser
from helpers import FUSION_GROUP, count_kind, run_optimized, script_from_source

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

CHAIN = """
def f(x, y):
    return (x * y + 1).relu().sigmoid()
"""


def chain(x, y):
    return (x * y + 1).relu().sigmoid()


@pytest.fixture(autouse=True)
def fuser_on():
    with fuser.enabled(True):
        yield


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_chain_fuses_and_matches(dtype):
    fn = script_from_source(CHAIN)
    x = torch.randn(1000, 37, device="cuda", dtype=dtype)
    y = torch.randn(37, device="cuda", dtype=dtype)
    before = fuser.stats()["kernel_launches"]
    out = run_optimized(fn, x, y)
    assert count_kind(torch.jit.last_executed_optimized_graph(), FUSION_GROUP) == 1
    assert fuser.stats()["kernel_launches"] > before
    torch.testing.assert_close(out, chain(x, y))


GELU_BIAS = """
def f(x, b):
    return torch.nn.functional.gelu(x + b)
"""


def _rows_cases(dtype):
    def randn(*shape):
        return torch.randn(*shape, device="cuda", dtype=dtype)

    wide = randn(256, 1026)
    return {
        # dense rows, aligned: the vector row loop
        "aligned": (randn(256, 1024), randn(1024)),
        # row length not a multiple of the vector width: element-wise rows
        "ragged": (randn(256, 1030), randn(1030)),
        # a view starting one element in: misaligned pointer and row stride
        "misaligned": (wide[:, 1:1025], randn(1024)),
        # a per-row bias, broadcast along the row
        "column": (randn(256, 1024), randn(256, 1)),
        # long rows: two vectors per thread and tile (four for doubles), the last tile of
        # each row partial
        "unrolled": (randn(64, 6152), randn(6152)),
        # too few elements for vectors to keep the SMs busy: one element per thread
        "small_rows": (randn(16, 1024), randn(1024)),
        # flat, with leftover elements after the vector loop
        "flat_tail": (randn(3 * 2**20 + 5), randn(3 * 2**20 + 5)),
        # more rows than gridDim.y holds: each block walks several rows
        "many_rows": (randn(70000, 128), randn(128)),
    }


@pytest.mark.parametrize(
    "case",
    [
        "aligned",
        "ragged",
        "misaligned",
        "column",
        "unrolled",
        "small_rows",
        "flat_tail",
        "many_rows",
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_row_and_flat_paths_match_eager(dtype, case):
    x, b = _rows_cases(dtype)[case]
    fn = script_from_source(GELU_BIAS)
    before = fuser.stats()["kernel_launches"]
    out = run_optimized(fn, x, b)
    assert fuser.stats()["kernel_launches"] > before
    torch.testing.assert_close(out, torch.nn.functional.gelu(x + b))


CHUNKED_GATES = """
def f(g, b, c):
    a0, a1, a2, a3 = (g + b).chunk(4, 1)
    return a0.sigmoid() * a1.tanh() + a2 * a3 + c
"""


@pytest.mark.parametrize("rows", [256, 16])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_chunks_sharing_strides_on_element_rows_match_eager(dtype, rows):
    # 9 tensors read, one written: too many for vectors, so rows go element-wise, and
    # the chunks of g (and of b) read through one offset each.
    def randn(*shape):
        return torch.randn(*shape, device="cuda", dtype=dtype)

    g, b, c = randn(rows, 4 * 1024), randn(4 * 1024), randn(rows, 1024)
    fn = script_from_source(CHUNKED_GATES)
    out = run_optimized(fn, g, b, c)
    assert count_kind(torch.jit.last_executed_optimized_graph(), FUSION_GROUP) == 1
    a0, a1, a2, a3 = (g + b).chunk(4, 1)
    torch.testing.assert_close(out, a0.sigmoid() * a1.tanh() + a2 * a3 + c)


# config.h's default, unless the run sets FUSER_SHAPE_KERNELS.
SHAPE_KERNELS = int(os.environ.get("FUSER_SHAPE_KERNELS", "4"))


def _kernels_built() -> int:
    stats = fuser.stats()
    return stats["kernels_compiled"] + stats["disk_cache_hits"] + stats["memory_cache_hits"]


def test_first_shapes_get_their_own_kernels_then_share_one():
    # The chunks make the kernel strided: each of the group's first SHAPE_KERNELS shapes
    # gets a kernel with its sizes written in; later shapes share one more kernel.
    fn = script_from_source(CHUNKED_GATES)

    def args(rows):
        g, b, c = torch.randn(rows, 4 * 1024), torch.randn(4 * 1024), torch.randn(rows, 1024)
        return g.cuda(), b.cuda(), c.cuda()

    def expected(g, b, c):
        a0, a1, a2, a3 = (g + b).chunk(4, 1)
        return a0.sigmoid() * a1.tanh() + a2 * a3 + c

    rows = [5, 6, 7, 9, 10, 11, 12]
    built = []
    for i, r in enumerate(rows):
        a = args(r)
        before = _kernels_built()
        out = run_optimized(fn, *a) if i == 0 else fn(*a)
        built.append(_kernels_built() - before)
        torch.testing.assert_close(out, expected(*a))
    assert built == [1 if i < SHAPE_KERNELS else int(i == SHAPE_KERNELS) for i in range(len(rows))]
    fixed = any("fx_inner = (idx_t)1024;" in source for source in fuser.kernel_sources())
    assert fixed == (SHAPE_KERNELS > 0)
    # Shapes met before find their kernels again, own or shared.
    before = _kernels_built()
    for r in rows:
        a = args(r)
        torch.testing.assert_close(fn(*a), expected(*a))
    assert _kernels_built() == before


def test_other_dtype_falls_back_correctly():
    fn = script_from_source(CHAIN)
    x, y = torch.randn(64, 64, device="cuda"), torch.randn(64, 64, device="cuda")
    run_optimized(fn, x, y)
    failures = fuser.stats()["guard_failures"]
    xh, yh = x.half(), y.half()
    torch.testing.assert_close(fn(xh, yh), chain(xh, yh))
    assert fuser.stats()["guard_failures"] == failures + 1


def test_cpu_scalar_tensor_with_cuda_tensor():
    fn = script_from_source("def f(x, s):\n    return (x * s + s).tanh()\n")
    x, s = torch.randn(300, device="cuda"), torch.tensor(0.75)
    out = run_optimized(fn, x, s)
    torch.testing.assert_close(out, (x * s + s).tanh())


def test_runs_on_the_current_stream():
    fn = script_from_source(CHAIN)
    x, y = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
    run_optimized(fn, x, y)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = fn(x, y)
        expected = chain(x, y)
    side.synchronize()
    torch.testing.assert_close(out, expected)


def test_training_gradients_match_eager():
    fn = script_from_source("def f(x, w):\n    return ((x * w).sigmoid() * x + w).tanh()\n")

    def grads(f):
        x = torch.randn(256, 64, device="cuda", requires_grad=True)
        w = torch.randn(64, device="cuda", requires_grad=True)
        torch.manual_seed(0)
        out = None
        for _ in range(4):
            x.grad = w.grad = None
            out = f(x, w)
            out.sum().backward()
        return out.detach(), x.grad, w.grad, (x.detach(), w.detach())

    torch.manual_seed(1)
    out, gx, gw, (x, w) = grads(fn)
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    ref = ((xr * wr).sigmoid() * xr + wr).tanh()
    ref.sum().backward()
    torch.testing.assert_close(out, ref.detach())
    torch.testing.assert_close(gx, xr.grad)
    torch.testing.assert_close(gw, wr.grad)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_second_device():
    fn = script_from_source(CHAIN)
    x, y = torch.randn(100, device="cuda:1"), torch.randn(100, device="cuda:1")
    out = run_optimized(fn, x, y)
    assert out.device == torch.device("cuda:1")
    torch.testing.assert_close(out, chain(x, y))


def test_outputs_come_from_pytorchs_caching_allocator():
    # Outputs are allocated past the dispatcher (fusion_executor.cpp): they must still be
    # PyTorch's caching allocator's blocks, counted and freed as eager's tensors are.
    fn = script_from_source(CHAIN)
    x, y = torch.randn(1024, 1024, device="cuda"), torch.randn(1024, 1024, device="cuda")
    run_optimized(fn, x, y)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    out = fn(x, y)
    assert torch.cuda.memory_allocated() - before == out.numel() * out.element_size()
    torch.testing.assert_close(out, chain(x, y))
    del out
    assert torch.cuda.memory_allocated() == before
