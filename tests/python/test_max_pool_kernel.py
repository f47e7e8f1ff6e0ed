"""fuser::max_pool2d (runtime/max_pool_op.cpp, passes/max_pool_kernel.cpp): channels-last
CUDA max pools run our kernel, with eager's values bit for bit and eager's strides;
every other input runs ATen's pool through the same operator."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from helpers import all_nodes, run_frozen_like_eager

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")

# kernel, stride, padding, dilation, ceil_mode
WINDOWS = [
    ((3, 3), (2, 2), (1, 1), (1, 1), False),  # resnet's stem
    ((2, 2), (), (0, 0), (1, 1), False),  # stride defaults to the kernel
    ((3, 2), (1, 2), (1, 0), (2, 1), True),
    ((3, 3), (2, 2), (0, 0), (1, 1), True),
    ((1, 1), (1, 1), (0, 0), (1, 1), False),
]


def pooled(x: torch.Tensor, window, op) -> torch.Tensor:
    kernel, stride, padding, dilation, ceil_mode = window
    return op(x, list(kernel), list(stride), list(padding), list(dilation), ceil_mode)


def specials(n: int, c: int, h: int, w: int, dtype: torch.dtype, device: str) -> torch.Tensor:
    gen = torch.Generator().manual_seed(c * 100 + h)
    x = torch.randn(n, c, h, w, generator=gen)
    flat = x.view(-1)
    picks = torch.randperm(flat.numel(), generator=gen)
    flat[picks[:3]] = float("nan")
    flat[picks[3:6]] = float("inf")
    flat[picks[6:9]] = float("-inf")
    return x.to(device=device, dtype=dtype).contiguous(memory_format=torch.channels_last)


def test_the_operator_runs_atens_pool_on_the_cpu():
    x = specials(2, 8, 9, 7, torch.float32, "cpu")
    for window in WINDOWS:
        got = pooled(x, window, torch.ops.fuser.max_pool2d)
        want = pooled(x, window, torch.max_pool2d)
        assert torch.equal(got.isnan(), want.isnan())
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
        assert got.stride() == want.stride()


@CUDA
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("channels", [64, 8, 3, 1])  # vectors of channels, and single ones
@pytest.mark.parametrize("window", WINDOWS)
def test_channels_last_cuda_pools_equal_eager_bit_for_bit(dtype, channels, window):
    x = specials(3, channels, 13, 11, dtype, "cuda")
    got = pooled(x, window, torch.ops.fuser.max_pool2d)
    want = pooled(x, window, torch.max_pool2d)
    assert got.shape == want.shape and got.stride() == want.stride()
    assert torch.equal(got.isnan(), want.isnan())
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


@CUDA
def test_other_inputs_and_windows_follow_aten():
    x = specials(2, 8, 9, 7, torch.float32, "cuda")
    row_major = x.contiguous()
    window = WINDOWS[0]
    for tensor in (row_major, x.double(), x[:, :4]):  # layout, dtype, a strided slice
        got = pooled(tensor, window, torch.ops.fuser.max_pool2d)
        want = pooled(tensor, window, torch.max_pool2d)
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
        assert got.stride() == want.stride()
    with pytest.raises(RuntimeError, match="pad"):
        torch.ops.fuser.max_pool2d(x, [2, 2], [2, 2], [2, 2], [1, 1], False)
    misaligned = torch.empty(x.numel() + 1, device="cuda")[1:].view_as(x)
    misaligned = misaligned.as_strided(x.shape, x.stride()).copy_(x)
    got = pooled(misaligned, window, torch.ops.fuser.max_pool2d)
    torch.testing.assert_close(got, pooled(x, window, torch.max_pool2d), equal_nan=True)


class Network(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 16, 3, 2, 1)
        self.body = torch.nn.Conv2d(16, 16, 3, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.max_pool2d(F.relu(self.stem(x)), 3, 2, 1)
        return F.max_pool2d(self.body(y) + y, 2)


@CUDA
def test_a_frozen_cuda_network_runs_our_pools(fused, monkeypatch):
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    torch.manual_seed(0)
    graph = run_frozen_like_eager(Network().cuda().eval(), torch.randn(2, 3, 32, 32, device="cuda"))
    kinds = [n.kind() for n in all_nodes(graph)]
    assert kinds.count("fuser::max_pool2d") == 2, graph
    assert "aten::max_pool2d" not in kinds, graph
