"""A max pool of a monotone epilogue reads the epilogue's input, and the epilogue runs
on the pooled value (passes/max_pool_first.cpp): max_pool(relu(conv(x) + b)) becomes
relu(max_pool(conv(x)) + b). The reordering must be exact: eager's values (up to the
fused ops' own rounding) with NaN and infinities in the same places, and chains where
the orders could differ (non-monotone ops, non-constant or per-position operands,
gradients, indices) must keep eager's order."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from helpers import (
    all_nodes,
    devices,
    eager_from_source,
    run_frozen_like_eager,
    run_python,
    script_from_source,
)

POOLS = ("aten::max_pool1d", "aten::max_pool2d", "aten::max_pool3d", "fuser::max_pool2d")


def pools(graph) -> list:
    return [n for n in all_nodes(graph) if n.kind() in POOLS]


def pool_reads(graph) -> str:
    """What the graph's one max pool reads: the kind of its input's producer."""
    (pool,) = pools(graph)
    return pool.inputsAt(0).node().kind()


def special_values(*shape: int, device: str) -> torch.Tensor:
    """Random values with NaN, +inf and -inf scattered in, and whole windows negative."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=gen)
    flat = x.view(-1)
    picks = torch.randperm(flat.numel(), generator=gen)
    flat[picks[:5]] = float("nan")
    flat[picks[5:10]] = float("inf")
    flat[picks[10:15]] = float("-inf")
    x[..., :4, :4] = -x[..., :4, :4].abs()  # windows whose ReLU is all zeros (ties)
    return x.to(device)


def run(source: str, *args: torch.Tensor):
    """The scripted function optimized; its result, eager's, and the graph run. `F.` in
    the source stands for torch.nn.functional."""
    source = source.replace("F.", "torch.nn.functional.")
    scripted = script_from_source(source)
    want = eager_from_source(source)(*args)
    with torch.no_grad():
        for _ in range(3):
            got = scripted(*args)
    return got, want, torch.jit.last_executed_optimized_graph()


def assert_like_eager(got: torch.Tensor, want: torch.Tensor) -> None:
    """Eager's strides and values: NaN and infinities in the same places, finite values
    within float32's tolerance (a fused op may round as eager's kernel does not; the
    reordering itself is exact)."""
    assert got.stride() == want.stride()
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got.isinf(), want.isinf())
    torch.testing.assert_close(got, want, equal_nan=True)


MOVED = {
    "relu_of_shift": "F.max_pool2d(torch.relu(x + 0.25), 3, 2, 1)",
    "clamp_scale_shift": "F.max_pool2d(torch.clamp(x * 2.0 - 1.5, -1.0, 3.0), 2)",
    "hardtanh_relu6": "F.max_pool2d(F.relu6(F.hardtanh(x / 4.0, -0.5, 0.5) + 1.0), 3, 1, 1)",
    "hardsigmoid": "F.max_pool2d(F.hardsigmoid(x), (2, 3), (1, 2), (1, 1), ceil_mode=True)",
    "leaky_relu": "F.max_pool2d(F.leaky_relu(x - 0.5, 0.1), 3, 2, 1, 2)",
    "clamp_min_max": "F.max_pool2d(torch.clamp_max(torch.clamp_min(x, -0.2), 0.7), 2)",
    "scalar_first": "F.max_pool2d(torch.relu(1.0 + x), 2)",
}


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("name", sorted(MOVED))
def test_monotone_chain_runs_after_the_pool_with_eagers_values(fused, name, device):
    source = f"""
def f(x):
    return {MOVED[name]}
"""
    x = special_values(2, 3, 10, 11, device=device)
    got, want, graph = run(source, x)
    assert_like_eager(got, want)
    assert pool_reads(graph) == "prim::Param", graph  # the pool reads x itself


@pytest.mark.parametrize("device", devices())
def test_pools_of_one_and_three_dims_move_too(fused, device):
    source = """
def f(x, y):
    return F.max_pool1d(torch.relu(x + 1.0), 3, 2), F.max_pool3d(torch.clamp(y, 0.0, 1.0), 2)
"""
    x = special_values(2, 4, 17, device=device)
    y = special_values(2, 3, 6, 7, 8, device=device)
    (got1, got3), (want1, want3), graph = run(source, x, y)
    assert_like_eager(got1, want1)
    assert_like_eager(got3, want3)
    assert [p.inputsAt(0).node().kind() for p in pools(graph)] == ["prim::Param"] * 2, graph


# Chains whose order matters: the pool keeps reading the epilogue's result.
KEPT = {
    "gelu": "F.max_pool2d(F.gelu(x + 0.25), 2)",  # not monotone
    "sigmoid": "F.max_pool2d(torch.sigmoid(x), 2)",  # rounding of exp not checked
    "negative_scale": "F.max_pool2d(torch.relu(x * -2.0), 2)",  # decreasing
    "zero_slope": "F.max_pool2d(F.leaky_relu(x, 0.0), 2)",  # -inf * 0 is NaN
    "full_size_operand": "F.max_pool2d(torch.relu(x + y), 2)",  # differs across a window
    "per_column_operand": "F.max_pool2d(torch.relu(x + y[0, 0, 0]), 2)",
    "per_channel_tensor": "F.max_pool2d(torch.relu(x + y[:, :, :1, :1]), 2)",  # not constant
    "infinite_shift": "F.max_pool2d(torch.relu(x + float('inf')), 2)",  # -inf + inf is NaN
    "overflowing_shift": "F.max_pool2d(torch.relu(torch.add(x, 1e20, alpha=1e20)), 2)",
}


@pytest.mark.parametrize("name", sorted(KEPT))
def test_chains_that_could_differ_stay_before_the_pool(fused, name):
    source = f"""
def f(x, y):
    return {KEPT[name]}
"""
    gen = torch.Generator().manual_seed(0)  # finite: eager's gelu(inf) is NaN on CPU
    x, y = torch.randn(2, 2, 3, 10, 11, generator=gen)
    got, want, graph = run(source, x, y)
    torch.testing.assert_close(got, want, equal_nan=True)
    assert pool_reads(graph) != "prim::Param", graph


def test_a_value_read_beside_the_pool_keeps_its_chain(fused):
    source = """
def f(x):
    r = torch.relu(x + 1.0)
    return F.max_pool2d(r, 2), r.sum()
"""
    x = special_values(2, 3, 10, 11, device="cpu")
    (got, total), (want, want_total), graph = run(source, x)
    assert_like_eager(got, want)
    torch.testing.assert_close(total, want_total, equal_nan=True)
    assert pool_reads(graph) != "prim::Param", graph


def test_indices_and_gradients_keep_the_order(fused):
    source = """
def f(x):
    v, i = F.max_pool2d(torch.relu(x + 1.0), 2, return_indices=True)
    return v, i
"""
    x = special_values(2, 3, 10, 11, device="cpu")
    (v, i), (want_v, want_i), graph = run(source, x)
    assert_like_eager(v, want_v)
    assert torch.equal(i, want_i)

    grad_source = """
def f(x):
    return torch.nn.functional.max_pool2d(torch.relu(x + 1.0), 2)
"""
    scripted = script_from_source(grad_source)
    x = torch.randn(2, 3, 10, 11)
    x[..., :4, :4] = -5.0  # windows of tied zeros after the ReLU
    x.requires_grad_()
    for _ in range(3):
        got = scripted(x)
    (grad,) = torch.autograd.grad(got.sum(), x)
    want = eager_from_source(grad_source)(x)
    (want_grad,) = torch.autograd.grad(want.sum(), x)
    torch.testing.assert_close(grad, want_grad)
    graph = torch.jit.last_executed_optimized_graph()
    assert all(p.inputsAt(0).node().kind() != "prim::Param" for p in pools(graph)), graph


class Stem(torch.nn.Module):
    """ResNet's stem: convolution, BatchNorm, ReLU, 3x3/2 max pool; then a block."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 7, 2, 3, bias=False)
        self.bn = torch.nn.BatchNorm2d(8)
        self.next = torch.nn.Conv2d(8, 8, 1)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)
            self.bn.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.max_pool2d(F.relu(self.bn(self.conv(x))), 3, 2, 1)
        return F.relu(self.next(y) + y)


@pytest.mark.parametrize("device", devices())
def test_frozen_stem_pools_the_convolution_and_adds_the_bias_after(fused, device, monkeypatch):
    # Without TF32: CUDA runs this network channels-last, with other cuDNN algorithms.
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    torch.manual_seed(0)
    module = Stem().to(device).eval()
    graph = run_frozen_like_eager(module, torch.randn(2, 3, 32, 32, device=device))
    assert pool_reads(graph) in ("aten::conv2d", "aten::_convolution"), graph


def test_fuser_pool_first_0_keeps_the_order():
    code = """
import torch, fuser
torch._C._jit_set_num_profiled_runs(1)
fuser.enable()
f = torch.jit.CompilationUnit('''
def f(x):
    return torch.nn.functional.max_pool2d(torch.relu(x + 1.0), 2)
''').f
x = torch.randn(2, 3, 8, 8)
with torch.no_grad():
    for _ in range(3):
        y = f(x)
assert torch.equal(y, torch.nn.functional.max_pool2d(torch.relu(x + 1.0), 2))
(pool,) = torch.jit.last_executed_optimized_graph().findAllNodes("aten::max_pool2d")
print(pool.inputsAt(0).node().kind())
"""
    moved = run_python(code)
    kept = run_python(code, {"FUSER_POOL_FIRST": "0"})
    assert moved.returncode == 0 and kept.returncode == 0, moved.stderr + kept.stderr
    assert moved.stdout.split() == ["prim::Param"]
    assert kept.stdout.split() == ["prim::If"]
