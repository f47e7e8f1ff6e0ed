"""CPU row kernels sum float rows as explicit vectors of 16 in four accumulators
(csrc/codegen/cpp_row_printer.cpp: vectorSumValues, printVectorSums) where a pass's
reductions are float sums of values made by loads of unit-stride float or bfloat16 rows
and + - * / or negation: whole vectors four to a step, then the row's last 16 elements
with the lanes already summed left out, then, in rows shorter than a vector, a plain
loop. A lone float
sum or mean of contiguous CPU rows forms a group of its own (passes/groups.cpp:
isCpuRowSumOfFloats). Every case is compared with eager: values, shape and strides."""

from __future__ import annotations

import pytest
import torch

import fuser
from fuser import _C
from helpers import eager_from_source, script_from_source, torch_threads

BODIES = {
    "plain": "def f(x, y):\n    return x.sum(-1, keepdim=True)\n",
    "mean_of_a_product": "def f(x, y):\n    return (x * y).mean(-1)\n",
    # A value of the row (the mean) inside the second pass: layer_norm's variance.
    "variance_by_hand": (
        "def f(x, y):\n"
        "    m = x.mean(-1, keepdim=True)\n"
        "    return ((x - m) * (x - m)).mean(-1, keepdim=True) + y.sum(-1, keepdim=True)\n"
    ),
    "negation_and_division": "def f(x, y):\n    return (-x / (y + 3.0)).sum(-1)\n",
}

# Row lengths around the vector (16), the four-vector step (64) and the float block (256),
# and past the held rows (4096): the masked last vector, rows shorter than a vector.
LENGTHS = [1, 5, 15, 16, 17, 49, 63, 64, 65, 80, 196, 255, 256, 257, 300, 513, 4097]


def fused_calls(source: str, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, int]]:
    """The third call's result of `source` scripted with the fuser on, and the stats."""
    with fuser.enabled(True):
        fuser.reset_stats()
        f = script_from_source(source)
        for _ in range(3):
            got = f(x)
        return got, fuser.stats()


def vector_sums_printed() -> bool:
    # (Kernels take the row's length at run time: one serves every length.)
    return any("fx_load16(" in s and "fx_lanes_from(" in s for s in fuser.kernel_sources())


@pytest.mark.parametrize("body", sorted(BODIES))
@pytest.mark.parametrize("n", LENGTHS)
def test_vector_sums_match_eager(body: str, n: int) -> None:
    g = torch.Generator().manual_seed(n)
    x = torch.randn(37, n, generator=g) * 4.0 + 1.0
    y = torch.rand(37, n, generator=g) + 0.5
    with fuser.enabled(True), torch.no_grad():
        fuser.reset_stats()
        f = script_from_source(BODIES[body])
        for _ in range(3):
            got = f(x, y)
        assert fuser.stats()["kernel_launches"] >= 1
    want = eager_from_source(BODIES[body])(x, y)
    assert got.shape == want.shape and got.stride() == want.stride()
    torch.testing.assert_close(got, want, rtol=2e-5, atol=2e-5)
    assert vector_sums_printed()


BFLOAT16_ROWS = (
    "def f(x, w, b):\n    return torch.layer_norm(x, [x.size(-1)], w, b, 1e-5), x.sum(-1) * 2.0\n"
)


@pytest.mark.parametrize("n", [5, 15, 16, 17, 64, 65, 196, 257, 300, 4097])
def test_bfloat16_rows_are_summed_as_vectors(n: int) -> None:
    """bfloat16 rows load as 16 floats at a time (fx_load16_bf): LayerNorm's statistics
    and a sum in float, as eager's."""
    g = torch.Generator().manual_seed(n)
    x = (torch.randn(37, n, generator=g) * 4.0 + 1.0).to(torch.bfloat16)
    w = torch.randn(n, generator=g).to(torch.bfloat16)
    b = torch.randn(n, generator=g).to(torch.bfloat16)
    with fuser.enabled(True), torch.no_grad():
        fuser.reset_stats()
        f = script_from_source(BFLOAT16_ROWS)
        for _ in range(3):
            got = f(x, w, b)
        assert fuser.stats()["kernel_launches"] >= 1 and fuser.stats()["interpreted_runs"] == 0
    want = eager_from_source(BFLOAT16_ROWS)(x, w, b)
    for g_, w_ in zip(got, want, strict=True):
        assert g_.dtype == w_.dtype and g_.stride() == w_.stride()
        torch.testing.assert_close(g_, w_, rtol=1.6e-2, atol=1.6e-2)
    assert any("fx_load16_bf(in" in s for s in fuser.kernel_sources())


def test_a_vector_sum_sees_infinities_and_nan_in_every_lane() -> None:
    # Each special value in turn at every position of a row of 83: the whole vectors,
    # the masked last one (its first lanes were summed already) and beyond.
    f = script_from_source("def f(x):\n    return x.sum(-1)\n")
    for special in (float("inf"), float("-inf"), float("nan")):
        x = torch.ones(83, 83)
        x[torch.arange(83), torch.arange(83)] = special
        with fuser.enabled(True):
            for _ in range(3):
                got = f(x)
        want = x.sum(-1)
        torch.testing.assert_close(got, want, equal_nan=True)


def test_a_sum_of_a_value_of_the_row_keeps_the_loop() -> None:
    # The backward of a normalization summed over its row sums the output's gradient,
    # one value per row, over the row: not an element value, so that pass is printed
    # as the loop (fuzz_training seed 9005: it failed to compile as vectors and the
    # group ran interpreted).
    source = (
        "def f(x):\n"
        "    y = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + 1e-5)\n"
        "    return y.sum(-1)\n"
    )
    x = torch.randn(4, 3, 64, generator=torch.Generator().manual_seed(5), requires_grad=True)
    weight = torch.randn(4, 3, generator=torch.Generator().manual_seed(6))
    f = script_from_source(source)
    with fuser.enabled(True):
        fuser.reset_stats()
        for _ in range(4):
            (got,) = torch.autograd.grad((f(x) * weight).sum(), [x])
        stats = fuser.stats()
    (want,) = torch.autograd.grad((eager_from_source(source)(x) * weight).sum(), [x])
    assert stats["groups_formed"] >= 1 and stats["interpreted_runs"] == 0, stats
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("splits", [3, 7])
def test_vector_sums_in_slices_of_a_row(splits: int) -> None:
    # Slices start inside rows, not at whole vectors: the masked last vector of each
    # slice must leave out what the slice before it summed.
    x = torch.randn(2, 20011, generator=torch.Generator().manual_seed(1))
    _C._set_row_splits(splits)
    try:
        with fuser.enabled(True):
            fuser.reset_stats()
            f = script_from_source("def f(x):\n    return (x * 0.5).sum(-1) + x.mean(-1)\n")
            for _ in range(3):
                got = f(x)
            staged = fuser.stats()["staged_calls"]
    finally:
        _C._set_row_splits(0)
    assert staged >= 1
    torch.testing.assert_close(got, (x * 0.5).sum(-1) + x.mean(-1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(
    "source, shape",
    [
        ("def f(x):\n    return x.mean((2, 3), keepdim=True)\n", (1, 960, 7, 7)),
        ("def f(x):\n    return x.mean((-1, -2))\n", (4, 72, 28, 28)),
        ("def f(x):\n    return x.sum(-1)\n", (64, 5)),
        ("def f(x):\n    return x.sum()\n", (1000, 33)),
    ],
)
def test_a_lone_cpu_sum_or_mean_of_rows_is_fused(source: str, shape: tuple, threads: int) -> None:
    x = torch.randn(shape, generator=torch.Generator().manual_seed(2))
    with torch_threads(threads):
        got, stats = fused_calls(source, x)
    want = eager_from_source(source)(x)
    assert stats["groups_formed"] == 1 and stats["kernel_launches"] >= 1, stats
    assert got.shape == want.shape and got.stride() == want.stride()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "make",
    [
        # Read across strides (channels-last) and other dtypes: the vector sums do not
        # apply, and such reductions alone stay with ATen.
        lambda: torch.randn(2, 64, 7, 7).to(memory_format=torch.channels_last),
        lambda: torch.randn(2, 64, 7, 7, dtype=torch.float64),
        lambda: torch.randn(2, 64, 7, 7).to(torch.bfloat16),
    ],
    ids=["channels_last", "float64", "bfloat16"],
)
def test_other_lone_means_stay_with_aten(make) -> None:
    x = make()
    got, stats = fused_calls("def f(x):\n    return x.mean((2, 3))\n", x)
    assert stats["groups_formed"] == 0
    torch.testing.assert_close(got, x.mean((2, 3)))


POOL = "def f(x):\n    return torch.nn.functional.adaptive_avg_pool2d(x, 1)\n"
POOL_AFTER = (
    "def f(x):\n"
    "    y = torch.nn.functional.hardswish(x)\n"
    "    return torch.nn.functional.adaptive_avg_pool2d(y, (1, 1)) * y\n"
)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", [(2, 72, 28, 28), (960, 7, 7)], ids=["nchw", "chw"])
@pytest.mark.parametrize("source", [POOL_AFTER, POOL], ids=["after_hardswish", "alone"])
def test_adaptive_average_pools_to_one_are_means_in_groups(source, shape, dtype) -> None:
    # mobilenet_v3's squeeze-excite: the pool is eager's mean over H and W (three ATen
    # kernels on CPU); in a group, or alone in float32.
    x = torch.randn(shape, generator=torch.Generator().manual_seed(3)).to(dtype)
    got, stats = fused_calls(source, x)
    want = eager_from_source(source)(x)
    fused = source == POOL_AFTER or dtype == torch.float32
    assert stats["groups_formed"] == (1 if fused else 0), stats
    assert stats["interpreted_runs"] == 0, stats
    assert got.shape == want.shape and got.stride() == want.stride()
    tol = 1e-2 if dtype == torch.bfloat16 else 1e-5
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


def test_a_channels_last_pool_keeps_eager_strides() -> None:
    # Eager restrides the [N, C, 1, 1] result of a channels-last input: such calls run
    # the group interpreted, strides and values eager's.
    x = torch.randn(2, 16, 5, 5, generator=torch.Generator().manual_seed(4))
    f = script_from_source(POOL_AFTER)
    pool = script_from_source(POOL)
    with fuser.enabled(True):
        for _ in range(3):
            f(x)
            pool(x)
        fuser.reset_stats()
        xc = x.to(memory_format=torch.channels_last)
        got, alone = f(xc), pool(xc)
        assert fuser.stats()["interpreted_runs"] == 2
    for value, source in ((got, POOL_AFTER), (alone, POOL)):
        want = eager_from_source(source)(xc)
        assert value.stride() == want.stride()
        torch.testing.assert_close(value, want)


def test_pools_to_more_than_one_element_stay_with_aten() -> None:
    source = (
        "def f(x):\n    return torch.nn.functional.adaptive_avg_pool2d(torch.relu(x), 2) + 1.0\n"
    )
    x = torch.randn(2, 8, 6, 6)
    with fuser.enabled(True):
        f = script_from_source(source)
        for _ in range(3):
            got = f(x)
    graph = f.graph_for(x)
    assert "aten::adaptive_avg_pool2d" in str(graph)
    torch.testing.assert_close(got, eager_from_source(source)(x))
