"""Autodiff's aten::_grad_sum_to_size (a bias's gradient, a broadcast operand's) in
groups: a sum over the leading dims, or over the dims the size gives as 1, which a
column or row kernel computes. The size is an input of the graph (autodiff's captured
`bias.size()` or broadcast sizes); the guard pins it to the sizes profiled on the
result, and a call with another size (or None) runs the fallback, which sums as eager
does. A lone sum over leading dims keeps its group (ATen's are slower).
FUSER_GRADIENT_SUMS=0 leaves the sums to ATen."""

from __future__ import annotations

import pytest
import torch

import fuser
from helpers import (
    all_nodes,
    devices,
    eager_from_source,
    fused_kinds,
    run_python,
    script_from_source,
)

GRAD_SUM = "aten::_grad_sum_to_size"
TOLERANCE = {
    torch.float16: {"rtol": 5e-3, "atol": 5e-3},
    torch.bfloat16: {"rtol": 3e-2, "atol": 3e-2},
}


SUM_TO = """
def sum_to(g, size: Optional[List[int]]):
    return torch.ops.aten._grad_sum_to_size(g, size)
"""
SIGMOID_SUM_TO = """
def sigmoid_sum_to(g, x, size: List[int]):
    return torch.ops.aten._grad_sum_to_size(g * torch.sigmoid(x), size)
"""


def sum_to(g: torch.Tensor, size: list[int] | None) -> torch.Tensor:
    return torch.ops.aten._grad_sum_to_size(g, size)


def gradient_and_input(shape, device: str, dtype: torch.dtype = torch.float32, seed: int = 0):
    """A gradient and the input of the sigmoid it is multiplied by, seeded."""
    g = torch.Generator().manual_seed(seed)
    grad = torch.randn(shape, generator=g).to(device, dtype)
    return grad, torch.randn(shape, generator=g).to(device, dtype)


def run(fn, *args, calls: int = 3):
    with fuser.enabled(True), torch.no_grad():
        for _ in range(calls):
            out = fn(*args)
        return out, fn.graph_for(*args)


def guard_lists(graph) -> list[list[int]]:
    """Each guard's pinned lists, flattened as the guard holds them (length, elements)."""
    guards = [n for n in all_nodes(graph) if n.kind() == "fuser::TypeGuard"]
    return [list(getattr(n, "is")("lists")) for n in guards if n.hasAttribute("lists")]


def pinned_sizes(graph) -> list[list[int]]:
    """Every list the guards pin, one by one (a guard may pin several)."""
    out = []
    for flat in guard_lists(graph):
        at = 0
        while at < len(flat):
            out.append(flat[at + 1 : at + 1 + flat[at]])
            at += 1 + flat[at]
    return sorted(out)


def check_like_eager(got: torch.Tensor, want: torch.Tensor) -> None:
    assert (got.shape, got.dtype) == (want.shape, want.dtype)
    assert got.is_contiguous()
    torch.testing.assert_close(got, want, **TOLERANCE.get(got.dtype, {}))


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str
)
@pytest.mark.parametrize(
    "shape,size",
    [
        ((6, 40, 33), [33]),  # a bias's gradient: every leading dim
        ((6, 40, 33), [40, 33]),
        ((300, 7), []),  # every dim, to a scalar
        ((6, 40, 33), [6, 1, 33]),  # a dim of size 1, kept
        ((6, 40, 33), [1, 40, 1]),
        ((5, 9, 2, 3), [5, 9, 1, 1]),  # trailing dims of size 1: a row kernel
    ],
    ids=["bias", "two_kept", "scalar", "middle_unit", "outer_units", "trailing_units"],
)
def test_sums_fused_like_eager(device: str, dtype: torch.dtype, shape, size) -> None:
    grad, x = gradient_and_input(shape, device, dtype, seed=0)
    fn = script_from_source(SIGMOID_SUM_TO)
    fuser.reset_stats()
    got, graph = run(fn, grad, x, size)
    check_like_eager(got, sum_to(grad * torch.sigmoid(x), size))
    assert GRAD_SUM in fused_kinds(graph), graph
    assert guard_lists(graph) == [[len(size), *size]], graph
    assert fuser.stats()["guard_failures"] == 0


@pytest.mark.parametrize("device", devices())
def test_lone_bias_gradient_keeps_its_group(device: str) -> None:
    grad = torch.randn(8, 16, 24, device=device)
    fn = script_from_source(SUM_TO)
    got, graph = run(fn, grad, [24])
    check_like_eager(got, grad.sum([0, 1]))
    assert GRAD_SUM in fused_kinds(graph), graph


@pytest.mark.parametrize("device", devices())
def test_other_sizes_run_the_fallback(device: str) -> None:
    grad, x = gradient_and_input((6, 40, 33), device, seed=1)
    fn = script_from_source(SIGMOID_SUM_TO)
    run(fn, grad, x, [33])
    product = grad * torch.sigmoid(x)
    fuser.reset_stats()
    with fuser.enabled(True), torch.no_grad():
        # Same rank of size, other dims summed: the pinned [33] would sum the wrong ones.
        for size in ([40, 33], [1, 33], [6, 1, 33], [33]):
            check_like_eager(fn(grad, x, size), sum_to(product, size))
    assert fuser.stats()["guard_failures"] >= 3, fuser.stats()


@pytest.mark.parametrize("device", devices())
def test_none_size_after_a_list_runs_the_fallback(device: str) -> None:
    grad = torch.randn(4, 8, device=device)
    fn = script_from_source(SUM_TO)
    run(fn, grad, [8])
    with fuser.enabled(True), torch.no_grad():
        got = fn(grad, None)
    assert torch.equal(got, grad)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize(
    "shape,size", [((4, 1), None), ((1, 5), [1, 5]), ((3, 1, 2), [3, 1, 2])], ids=str
)
def test_sums_that_reduced_nothing_stay_with_aten(device: str, shape, size) -> None:
    """A None size, or one that sums only dims of size 1: eager returns the gradient
    itself. (A group pinning the profiled result's sizes would fail its guard on every
    None, each fallback profiled and fused again.)"""
    grad, x = gradient_and_input(shape, device, seed=3)
    fn = script_from_source(SIGMOID_SUM_TO.replace("size: List[int]", "size: Optional[List[int]]"))
    fuser.reset_stats()
    with fuser.enabled(True), torch.no_grad():
        for _ in range(8):
            got = fn(grad, x, size)
        graph = fn.graph_for(grad, x, size)
    check_like_eager(got, sum_to(grad * torch.sigmoid(x), size))
    assert GRAD_SUM not in fused_kinds(graph), graph
    stats = fuser.stats()
    assert stats["guard_failures"] == 0 and stats["groups_formed"] <= 1, stats


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize(
    "size,bad",
    [([33], (6, 40, 34)), ([33], (6, 40, 1)), ([6, 1, 33], (2, 40, 33))],
    ids=["wider", "narrower", "other_kept_dim"],
)
def test_sizes_that_do_not_expand_raise_as_eager(device: str, size, bad) -> None:
    """The guard pins the size, not the gradient's sizes: a gradient the size does not
    expand to makes eager raise, and the fused call too (its subgraph runs)."""
    fn = script_from_source(SIGMOID_SUM_TO)
    shape = (6, 40, 33)
    run(fn, torch.randn(shape, device=device), torch.randn(shape, device=device), size)
    grad, x = torch.randn(bad, device=device), torch.randn(bad, device=device)
    with pytest.raises(RuntimeError):
        sum_to(grad * torch.sigmoid(x), size)
    fuser.reset_stats()
    with fuser.enabled(True), torch.no_grad(), pytest.raises(RuntimeError):
        fn(grad, x, size)
    assert fuser.stats()["guard_failures"] == 0  # the fused path itself refused the call


@pytest.mark.parametrize("device", devices())
def test_leading_and_unit_dims_together_stay_with_aten(device: str) -> None:
    # [6, 40, 33] to [1, 33]: dim 0 dropped and dim 1 kept as 1; a row reduction's result
    # keeps every reduced dim or none.
    grad, x = gradient_and_input((6, 40, 33), device, seed=2)
    fn = script_from_source(SIGMOID_SUM_TO)
    got, graph = run(fn, grad, x, [1, 33])
    check_like_eager(got, sum_to(grad * torch.sigmoid(x), [1, 33]))
    assert GRAD_SUM not in fused_kinds(graph), graph
    assert "aten::sigmoid" in fused_kinds(graph), graph


def block_class() -> type[torch.nn.Module]:
    """A linear layer, two broadcast parameters and activations: autodiff sums each
    one's gradient with _grad_sum_to_size. A class per test: scripted modules of one
    class share their compiled methods, and with them a plan profiled by another test."""

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(24, 48)
            self.scale = torch.nn.Parameter(torch.rand(48) + 0.5)
            self.shift = torch.nn.Parameter(torch.randn(5, 1, 48))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.fc(x)
            return torch.tanh(y * self.scale) + torch.sigmoid(y) * self.shift

    return Block


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16], ids=str)
def test_training_gradients_match_eager(device: str, dtype: torch.dtype) -> None:
    if dtype == torch.float16 and device == "cpu":
        pytest.skip("eager's CPU addmm of float16 is slow and its sums round per block")
    torch.manual_seed(0)
    block = block_class()
    eager = block().to(device, dtype)
    scripted = torch.jit.script(block().to(device, dtype))
    scripted.load_state_dict(eager.state_dict())
    x = torch.randn(5, 7, 24, device=device, dtype=dtype)
    weights = torch.randn(5, 7, 48, device=device, dtype=dtype)
    fuser.reset_stats()
    with fuser.enabled(True), torch.autograd.set_multithreading_enabled(False):
        for _ in range(4):
            xs = x.clone().requires_grad_()
            got = scripted(xs)
            got_grads = torch.autograd.grad((got * weights).sum(), [xs, *scripted.parameters()])
        backward = torch.jit.last_executed_optimized_graph()
    xe = x.clone().requires_grad_()
    want = eager(xe)
    want_grads = torch.autograd.grad((want * weights).sum(), [xe, *eager.parameters()])
    tol = TOLERANCE.get(dtype, {})
    torch.testing.assert_close(got, want, **tol)
    for g, w in zip(got_grads, want_grads, strict=True):
        assert (g.shape, g.dtype, g.stride()) == (w.shape, w.dtype, w.stride())
        torch.testing.assert_close(g, w, **tol)
    # The linear's bias and `scale` sum over every leading dim, `shift` over dim 1 kept.
    assert GRAD_SUM in fused_kinds(backward), backward
    pinned = pinned_sizes(backward)
    assert [48] in pinned and [5, 1, 48] in pinned, pinned
    assert fuser.stats()["guard_failures"] == 0, fuser.stats()


def test_flag_leaves_the_sums_to_aten() -> None:
    code = """
        import torch, fuser
        cu = torch.jit.CompilationUnit('''
        def f(g, x, size: List[int]):
            return torch.ops.aten._grad_sum_to_size(g * torch.sigmoid(x), size)
        ''')
        g, x = torch.randn(6, 40, 33), torch.randn(6, 40, 33)
        with fuser.enabled(True), torch.no_grad():
            for _ in range(3):
                out = cu.f(g, x, [33])
            graph = cu.f.graph_for(g, x, [33])
        torch.testing.assert_close(out, (g * torch.sigmoid(x)).sum([0, 1]))
        groups = [n for n in graph.findAllNodes("fuser::FusionGroup")]
        inside = [k.kind() for n in groups for k in n.g("Subgraph").nodes()]
        print("aten::_grad_sum_to_size" in inside)
    """
    fused = run_python(code)
    kept = run_python(code, {"FUSER_GRADIENT_SUMS": "0"})
    assert fused.returncode == 0 and kept.returncode == 0, fused.stderr + kept.stderr
    assert fused.stdout.split() == ["True"]
    assert kept.stdout.split() == ["False"]


@pytest.mark.parametrize("device", devices())
def test_transposed_and_expanded_operands_sum_in_place(device: str) -> None:
    """`p`'s gradient in `(x / (p * p + 1)).sum([0])` with `x` transposed: the sum over
    dim 0 reads x's columns as runs and the upstream gradient expanded along dim 0
    (strides [0, 1]), one value per walked row: read in place, not interpreted (the
    expanded operand was refused where the walk went by rows)."""
    source = "def f(x, p):\n    return (x / (p * p + 1.0)).sum([0])\n"
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 6, generator=g).to(device).t()
    p = torch.randn(8, generator=g).to(device)
    upstream = torch.randn(8, generator=g).to(device)
    leaves = [a.clone().requires_grad_() for a in (x, p)]
    want = torch.autograd.grad(eager_from_source(source)(*leaves), leaves, upstream)
    fn = script_from_source(source)
    with fuser.enabled(True), torch.autograd.set_multithreading_enabled(False):
        for _ in range(4):
            leaves = [a.clone().requires_grad_() for a in (x, p)]
            got = torch.autograd.grad(fn(*leaves), leaves, upstream)
        backward = torch.jit.last_executed_optimized_graph()
    for ours, eager in zip(got, want, strict=True):
        torch.testing.assert_close(ours, eager, rtol=1e-5, atol=1e-5)
    assert GRAD_SUM in fused_kinds(backward), backward
    stats = fuser.stats()
    assert stats["interpreted_runs"] == 0, stats
