"""The FusionGroup runtime (csrc/runtime/): iteration planning over shapes and layouts,
specialization and caching, on every available device. Groups are built by hand here,
so these tests do not depend on the pass."""

import pytest
import torch

import fuser
from helpers import devices, fusion_group_function

CHAIN_IR = """
graph(%x : Tensor, %y : Tensor):
  %one : int = prim::Constant[value=1]()
  %m : Tensor = aten::mul(%x, %y)
  %a : Tensor = aten::add(%m, %one, %one)
  %r : Tensor = aten::relu(%a)
  %s : Tensor = aten::sigmoid(%r)
  return (%s)
"""

TWO_OUTPUTS_IR = """
graph(%x : Tensor, %y : Tensor, %alpha : float):
  %m : Tensor = aten::mul(%x, %y)
  %a : Tensor = aten::add(%m, %x, %alpha)
  return (%m, %a)
"""


def chain(x, y):
    return (x * y + 1).relu().sigmoid()


@pytest.fixture(scope="module")
def chain_fn():
    return fusion_group_function(CHAIN_IR)


def launches():
    return fuser.stats()["kernel_launches"]


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize(
    "make",
    [
        pytest.param(
            lambda d: (torch.randn(37, 19, device=d), torch.randn(37, 19, device=d)), id="same"
        ),
        pytest.param(
            lambda d: (torch.randn(64, 33, device=d), torch.randn(33, device=d)), id="bcast-row"
        ),
        pytest.param(
            lambda d: (torch.randn(64, 1, device=d), torch.randn(1, 33, device=d)), id="outer"
        ),
        pytest.param(
            lambda d: (torch.randn(40, 30, device=d).t(), torch.randn(40, device=d)),
            id="transposed",
        ),
        pytest.param(
            lambda d: (torch.randn(50, 60, device=d)[::2, 1::3], torch.randn(20, device=d)),
            id="sliced",
        ),
        pytest.param(
            lambda d: (torch.randn((), device=d), torch.randn(5, 7, device=d)), id="zero-dim"
        ),
        pytest.param(
            lambda d: (torch.randn((), device=d), torch.randn((), device=d)), id="all-zero-dim"
        ),
        pytest.param(lambda d: (torch.randn(0, 7, device=d), torch.randn(7, device=d)), id="empty"),
        pytest.param(
            lambda d: (torch.randn(3, 1, 5, 1, 2, device=d), torch.randn(4, 1, 6, 1, device=d)),
            id="rank5",
        ),
        pytest.param(
            lambda d: (torch.randn(1 << 20, device=d), torch.randn(1 << 20, device=d)), id="large"
        ),
        pytest.param(
            lambda d: (torch.randn(1001, device=d)[1:], torch.randn(1000, device=d)), id="unaligned"
        ),
    ],
)
def test_layouts_match_eager(chain_fn, device, make):
    x, y = make(device)
    before = launches()
    out = chain_fn(x, y)
    expected = chain(x, y)
    torch.testing.assert_close(out, expected)
    assert out.shape == expected.shape and out.dtype == expected.dtype
    assert out.device == expected.device
    if expected.numel() > 0:
        assert launches() == before + 1


@pytest.mark.parametrize("device", devices())
def test_channels_last_stays_channels_last(chain_fn, device):
    x = torch.randn(2, 8, 5, 6, device=device).to(memory_format=torch.channels_last)
    y = torch.randn(2, 8, 5, 6, device=device).to(memory_format=torch.channels_last)
    out = chain_fn(x, y)
    expected = chain(x, y)
    torch.testing.assert_close(out, expected)
    assert out.stride() == expected.stride()
    assert out.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int8]
)
def test_dtypes(chain_fn, device, dtype):
    x = (torch.randn(33, 65, device=device) * 3).to(dtype)
    y = (torch.randn(65, device=device) * 3).to(dtype)
    out = chain_fn(x, y)
    expected = chain(x, y)
    assert out.dtype == expected.dtype
    # assert_close's per-dtype defaults allow the last-place differences that half types
    # show, since we round once where eager rounds after every op
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("device", devices())
def test_two_outputs_and_scalar_argument(device):
    fn = fusion_group_function(TWO_OUTPUTS_IR)
    x, y = torch.randn(10, 3, device=device), torch.randn(3, device=device)
    m, a = fn(x, y, 0.5)
    torch.testing.assert_close(m, x * y)
    torch.testing.assert_close(a, x * y + 0.5 * x)


def test_new_batch_size_reuses_the_kernel(chain_fn):
    chain_fn(torch.randn(16, 8), torch.randn(16, 8))
    compiled = fuser.stats()["kernels_compiled"]
    hits = fuser.stats()["disk_cache_hits"]
    for rows in (1, 3, 100, 1000):
        x, y = torch.randn(rows, 8), torch.randn(rows, 8)
        torch.testing.assert_close(chain_fn(x, y), chain(x, y))
    assert fuser.stats()["kernels_compiled"] == compiled
    assert fuser.stats()["disk_cache_hits"] == hits


@pytest.mark.parametrize("device", devices())
def test_kernel_build_time_is_counted_only_when_kernels_are_made(device):
    fn = fusion_group_function(CHAIN_IR)
    x, y = torch.randn(5, 7, device=device), torch.randn(5, 7, device=device)
    fuser.reset_stats()
    # The profiling run and the optimized graph each hold a new executor, which makes
    # (compiles, or finds cached) its kernel at its first call.
    fn(x, y)
    fn(x, y)
    built = fuser.stats()["kernel_build_us"]
    assert built > 0
    for _ in range(3):
        fn(x, y)
    assert fuser.stats()["kernel_build_us"] == built


def test_shape_mismatch_raises_like_eager(chain_fn):
    with pytest.raises(RuntimeError, match="must match the size"):
        chain_fn(torch.randn(3, 4), torch.randn(5, 4))


def test_nan_and_inf_propagate(chain_fn):
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e30])
    y = torch.ones(6)
    torch.testing.assert_close(chain_fn(x, y), chain(x, y), equal_nan=True)


CHUNKED_IR = """
graph(%gates : Tensor, %cx : Tensor):
  %i, %f, %g, %o = prim::ConstantChunk[chunks=4, dim=1](%gates)
  %ig : Tensor = aten::sigmoid(%i)
  %fg : Tensor = aten::sigmoid(%f)
  %gg : Tensor = aten::tanh(%g)
  %og : Tensor = aten::sigmoid(%o)
  %a : Tensor = aten::mul(%fg, %cx)
  %b : Tensor = aten::mul(%ig, %gg)
  %one : int = prim::Constant[value=1]()
  %cy : Tensor = aten::add(%a, %b, %one)
  %t : Tensor = aten::tanh(%cy)
  %hy : Tensor = aten::mul(%og, %t)
  return (%hy, %cy)
"""


def _cell(gates, cx):
    i, f, g, o = gates.chunk(4, 1)
    cy = i.sigmoid() * g.tanh() + f.sigmoid() * cx
    return o.sigmoid() * cy.tanh(), cy


def _repeated(fn, *args):
    """Runs fn once; returns its result and whether it reused the last call's plan."""
    before = fuser.stats()["repeated_calls"]
    out = fn(*args)
    return out, fuser.stats()["repeated_calls"] - before == 1


@pytest.mark.parametrize("device", devices())
def test_a_call_reuses_the_last_plan_only_while_the_layout_repeats(device):
    # Each call differs from the one before in one thing the plan depends on (sizes,
    # strides, alignment, dtype), or repeats it and takes the short path.
    fn = fusion_group_function(CHUNKED_IR)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, device=device, dtype=dtype)

    for _ in range(3):  # the profiling executor's first runs use executors of their own
        fn(randn(5, 32), randn(5, 8))
    calls = [
        ((randn(5, 32), randn(5, 8)), True),
        ((randn(6, 32), randn(6, 8)), False),  # sizes
        ((randn(32, 6).t(), randn(6, 8)), False),  # strides
        ((randn(6, 33)[:, 1:], randn(6, 8)), False),  # strides and alignment
        ((randn(6 * 32 + 1)[1:].view(6, 32), randn(6, 8)), False),  # alignment alone
        ((randn(6, 32), randn(6, 8)), False),
        ((randn(6, 32), randn(6, 8)), True),
        ((randn(6, 32, dtype=torch.float64), randn(6, 8, dtype=torch.float64)), False),
        ((randn(6, 32, dtype=torch.float64), randn(6, 8, dtype=torch.float64)), True),
    ]
    for args, repeats in calls:
        (hy, cy), repeated = _repeated(fn, *args)
        assert repeated == repeats
        hy_ref, cy_ref = _cell(*args)
        torch.testing.assert_close(cy, cy_ref)
        torch.testing.assert_close(hy, hy_ref)


@pytest.mark.parametrize("device", devices())
def test_a_repeated_call_with_misaligned_data_takes_the_full_path(chain_fn, device):
    # Same sizes and strides, data one element off 16-byte alignment: on CUDA the first
    # call's kernel moves aligned vectors, which the second's pointers do not allow.
    x, y = torch.randn(64, 64, device=device), torch.randn(64, 64, device=device)
    for _ in range(3):
        chain_fn(x, y)
    out, repeated = _repeated(chain_fn, x, y)
    assert repeated
    shifted = torch.randn(64 * 64 + 1, device=device)[1:].view(64, 64)
    out, repeated = _repeated(chain_fn, shifted, y)
    assert not repeated
    torch.testing.assert_close(out, chain(shifted, y))


@pytest.mark.parametrize("device", devices())
def test_chunked_input_is_read_in_place(device):
    fn = fusion_group_function(CHUNKED_IR)
    gates, cx = torch.randn(5, 4 * 7, device=device), torch.randn(5, 7, device=device)
    before = launches()
    hy, cy = fn(gates, cx)
    i, f, g, o = gates.chunk(4, 1)
    cy_ref = i.sigmoid() * g.tanh() + f.sigmoid() * cx
    torch.testing.assert_close(cy, cy_ref)
    torch.testing.assert_close(hy, o.sigmoid() * cy_ref.tanh())
    assert launches() == before + 1
