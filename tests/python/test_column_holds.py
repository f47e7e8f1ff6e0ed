"""CPU column walks keep the element values a later walk reads again, where computing
them again costs more than keeping them (codegen/column_printer.cpp, printHoldBuffers):
a softmax over channels computes each exponential once. Rows too long for the block's
buffer compute them again in every walk; both paths give eager's results, and the
same bits as each other."""

from __future__ import annotations

import re

import pytest
import torch
from test_reductions import compare

import fuser
from helpers import calls_on_threads, script_from_source

# Constants of their own keep these kernels' text apart from other tests' (a source the
# process compiled before is found in memory and not listed again).
SOFTMAX = "def f(x, y):\n    return torch.softmax(x * 0.8125 + y, 1)\n"
LOG_SOFTMAX = "def f(x, y):\n    return torch.log_softmax(x - y * 0.4375, 0) * 1.5\n"
# A normalization over channels (LayerNorm2d's arithmetic, any channel count).
LAYER_NORM = (
    "def f(x, y):\n"
    "    z = x + y\n"
    "    c = z - z.mean(1, keepdim=True)\n"
    "    return c / (c.pow(2).mean(1, keepdim=True) + 0.000625).sqrt()\n"
)


def inputs(dtype: torch.dtype, shape: tuple[int, ...]) -> list[torch.Tensor]:
    return [(torch.randn(shape) * 3).to(dtype) for _ in range(2)]


def kernels_of(source: str, *args: torch.Tensor) -> list[str]:
    before = len(fuser.kernel_sources())
    with fuser.enabled(True):
        compare(source, *args, dtype=args[0].dtype)
    return [s for s in fuser.kernel_sources()[before:] if "__global__" not in s]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_a_softmax_over_channels_computes_each_exponential_once(dtype: torch.dtype) -> None:
    [kernel] = kernels_of(SOFTMAX, *inputs(dtype, (2, 21, 16, 16)))
    # The exponentials, computed in the walk of the sum, are read back when storing.
    assert "fx_hold" in kernel
    held = set(re.findall(r"fx_h\d+\[fx_e \* fx_nb \+ fx_j\] = v(\d+);", kernel))
    read = set(re.findall(r"const float v(\d+) = fx_h\d+\[fx_e \* fx_nb \+ fx_j\];", kernel))
    assert held and read and read <= held, (held, read)
    exponentials = set(re.findall(r"const float v(\d+) = fx_expf\(", kernel))
    assert exponentials & held, (exponentials, held)
    # The sum and its exponentials share one buffer: a walk reads its held values
    # before it stores new ones.
    assert len(re.findall(r"float fx_hs\d+\[\d+\];", kernel)) == 1


def test_cheap_values_are_computed_again() -> None:
    """timm's float32 LayerNorm2d keeps nothing: reloading its input and subtracting the
    mean cost less than a store and a load."""
    source = (
        "def f(x):\n"
        "    z = torch.layer_norm(x.permute(0, 2, 3, 1), [24], None, None, 0.000625)\n"
        "    return z.permute(0, 3, 1, 2)\n"
    )
    before = len(fuser.kernel_sources())
    with fuser.enabled(True):
        compare(source, torch.randn(2, 24, 8, 8))
    [kernel] = [s for s in fuser.kernel_sources()[before:] if "__global__" not in s]
    assert "fx_hold" not in kernel


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("source", [SOFTMAX, LOG_SOFTMAX, LAYER_NORM], ids=["sm", "lsm", "ln"])
@pytest.mark.parametrize(
    "shape",
    # Channels whose values fit the stack, a thread's heap buffers, neither (computed
    # again); rows of one run and several; one channel.
    [(2, 21, 16, 16), (3, 64, 5, 7), (2, 200, 4, 4), (1, 700, 4, 4), (2, 3000, 1, 3), (1, 1, 3, 5)],
    ids=str,
)
def test_held_and_unheld_walks_give_eager_results(
    source: str, dtype: torch.dtype, shape: tuple[int, ...]
) -> None:
    args = inputs(dtype, shape)
    fuser.reset_stats()
    with fuser.enabled(True):
        compare(source, *args, dtype=dtype)
    stats = fuser.stats()
    assert stats["row_launches"] >= 2 and stats["interpreted_runs"] == 0, stats


@pytest.mark.parametrize("channels", [64, 200], ids=["stack", "heap"])
def test_held_and_computed_again_give_the_same_bits(channels: int) -> None:
    """One kernel serves every channel count: 64 channels' values fit its stack buffer,
    200 its heap buffers, 2048 neither (a block must keep 1024 rows). The same channels
    padded to 2048 with very negative ones, whose exponentials vanish, are computed
    again in every walk: the results agree bitwise."""
    fn = script_from_source(SOFTMAX)
    x, y = inputs(torch.bfloat16, (1, channels, 32, 16))
    pad = torch.full((1, 2048 - channels, 32, 16), -1e4, dtype=torch.bfloat16)
    with fuser.enabled(True):
        for _ in range(3):
            held = fn(x, y)
        for _ in range(3):
            again = fn(torch.cat([x, pad], 1), torch.cat([y, pad], 1))
    torch.testing.assert_close(held, torch.softmax(x * 0.8125 + y, 1))
    assert torch.equal(again[:, :channels], held)


# Values of several types held in one kernel: an integer sum's operand and a float
# softmax's exponentials (buffers are shared only within a type: an int32 buffer once
# took the float exponentials, and an int64 one double ones).
MARKERS = {"int32_and_float": "1.375", "int64_and_double": "0.0125"}
MIXED = {
    "int32_and_float": (
        "def f(x, y):\n"
        "    z = x * x + x * 3\n"
        "    m = y.amax(1, keepdim=True)\n"
        "    w = torch.where(y > m - 1.375, z, 0)\n"
        "    e = (y - m).exp()\n"
        "    return z.sum(1, keepdim=True), w.sum(1, keepdim=True), e / e.sum(1, keepdim=True)\n",
        torch.int32,
        torch.float32,
    ),
    "int64_and_double": (
        "def f(x, y):\n"
        "    z = x * x + x * 3\n"
        "    s = z.sum(1, keepdim=True)\n"
        "    e = ((z - s).double() * 0.0125 + y).exp()\n"
        "    return e / e.sum(1, keepdim=True)\n",
        torch.int64,
        torch.float64,
    ),
}


@pytest.mark.parametrize("case", sorted(MIXED))
@pytest.mark.parametrize("channels", [5, 200], ids=["stack", "heap"])
def test_values_of_several_types_keep_their_own_buffers(case: str, channels: int) -> None:
    source, int_dtype, float_dtype = MIXED[case]
    x = torch.randint(-4, 5, (2, channels, 8, 8), dtype=int_dtype)
    y = torch.randn(2, channels, 8, 8, dtype=float_dtype)
    fuser.reset_stats()
    with fuser.enabled(True):
        compare(source, x, y)
    assert fuser.stats()["interpreted_runs"] == 0
    kernel = cpu_kernel_with(MARKERS[case])
    types = re.findall(r"(\w+) fx_hs\d+\[\d+\];", kernel)
    assert len(types) >= 2 and len(set(types)) == len(types), types


def cpu_kernel_with(marker: str) -> str:
    """The CPU kernel this process compiled whose text has `marker` (a constant of its
    own): compiled by this test or, the same kernel, by an earlier one."""
    [kernel] = [
        s
        for s in fuser.kernel_sources()
        if "__global__" not in s and marker in s and "bool fx_hold" in s
    ]
    return kernel


def hold_limits(kernel: str) -> tuple[int, int]:
    """The most elements of each buffer a kernel holds on its stack and in its heap."""
    stack = re.search(r"bool fx_hold = fx_n \* 1024 <= (\d+);", kernel)
    heap = re.search(r"if \(!fx_hold && fx_n \* 1024 <= (\d+)\)", kernel)
    assert stack and heap, "no held values"
    return int(stack.group(1)), int(heap.group(1))


def test_the_paths_taken_follow_the_channels() -> None:
    """The bitwise test above takes the stack path at 64 channels, the heap's at 200 and
    neither at 2048, by the limits the kernel prints."""
    with fuser.enabled(True):
        compare(SOFTMAX, *inputs(torch.bfloat16, (1, 5, 4, 4)), dtype=torch.bfloat16)
    kernels = [s for s in fuser.kernel_sources() if "0.8125" in s and "bool fx_hold" in s]
    assert kernels
    for kernel in kernels:
        stack, heap = hold_limits(kernel)
        assert 64 * 1024 <= stack < 200 * 1024 <= heap < 2048 * 1024, (stack, heap)


def test_threads_keep_their_own_heap_buffers() -> None:
    """Calls on several threads at once each hold in their own thread's buffers."""
    fn = script_from_source(SOFTMAX)
    cases = [inputs(torch.float32, (2, 200, 8, 4)) for _ in range(4)]
    want = [torch.softmax(x * 0.8125 + y, 1) for x, y in cases]
    with fuser.enabled(True):
        for _ in range(3):
            fn(*cases[0])
        got = calls_on_threads(lambda i: fn(*cases[i]), len(cases))
    for i, outs in enumerate(got):
        assert len(outs) == 10
        for out in outs:
            torch.testing.assert_close(out, want[i])
