"""rms_norm (torch.nn.RMSNorm, F.rms_norm) in row groups with the elementwise ops around
it: x * rsqrt(mean(x^2) + eps) * weight over the trailing dims its normalized_shape
names, computed in float for 16-bit inputs and rounded once, as eager's kernel; eps None
is float's machine epsilon (double's for double inputs)."""

from __future__ import annotations

import pytest
import torch
from test_reductions import compare, subgraph_kinds

import fuser
from helpers import devices, run_optimized, script_from_source

RESIDUAL = (
    "def f(x, r, w):\n"
    "    return torch.nn.functional.rms_norm(x + r, [{shape}], {weight}, {eps}) * 2.0\n"
)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("eps", ["None", "1e-6"])
@pytest.mark.parametrize("weight", ["w", "None"])
def test_rms_norm_joins_its_neighbours(fused, device, dtype, eps, weight) -> None:
    text = RESIDUAL.format(shape="48", weight=weight, eps=eps)
    x = torch.randn(6, 10, 48, device=device, dtype=dtype)
    r = torch.randn(6, 10, 48, device=device, dtype=dtype)
    w = torch.randn(48, device=device, dtype=dtype)
    fn = compare(text, x, r, w, dtype=dtype)
    assert {"aten::add", "aten::rms_norm", "aten::mul"} <= subgraph_kinds(fn, x, r, w)
    assert fuser.stats()["interpreted_runs"] == 0


@pytest.mark.parametrize("device", devices())
def test_rms_norm_over_two_dims_and_rows_of_zeros(fused, device) -> None:
    text = RESIDUAL.format(shape="5, 12", weight="w", eps="1e-5")
    x = torch.randn(3, 4, 5, 12, device=device)
    x[1, 2] = 0.0  # a row of zeros: rsqrt(eps) times zero
    r = torch.zeros(3, 4, 5, 12, device=device)
    w = torch.randn(5, 12, device=device)
    fn = compare(text, x, r, w)
    assert "aten::rms_norm" in subgraph_kinds(fn, x, r, w)


@pytest.mark.parametrize("device", devices())
def test_rms_norm_module_frozen_with_its_bias_epilogue(fused, device) -> None:
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 32), torch.nn.RMSNorm(32, eps=1e-6), torch.nn.GELU()
    ).to(device)
    frozen = torch.jit.freeze(torch.jit.script(model).eval())
    x = torch.randn(16, 32, device=device)
    with torch.no_grad():
        got = run_optimized(frozen, x)
        want = model(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    graph = frozen.graph_for(x)
    kinds = {
        n.kind() for g in graph.findAllNodes("fuser::FusionGroup") for n in g.g("Subgraph").nodes()
    }
    assert "aten::rms_norm" in kinds


@pytest.mark.parametrize("device", devices())
def test_a_weight_of_another_shape_raises_as_eager(fused, device) -> None:
    text = RESIDUAL.format(shape="48", weight="w", eps="None")
    fn = script_from_source(text)
    x = torch.randn(4, 48, device=device)
    run_optimized(fn, x, x, torch.randn(48, device=device))
    bad = torch.randn(47, device=device)
    with pytest.raises(RuntimeError) as eager:
        torch.nn.functional.rms_norm(x + x, [48], bad, None)
    with pytest.raises(RuntimeError) as scripted:
        fn(x, x, bad)
    assert str(eager.value).splitlines()[0] in str(scripted.value)


@pytest.mark.parametrize("device", devices())
def test_training_graphs_leave_rms_norm_to_autograd(fused, device) -> None:
    # No autodiff formula: the op stays where autograd records it; gradients as eager's.
    text = RESIDUAL.format(shape="48", weight="w", eps="None")
    fn = script_from_source(text)
    for _ in range(3):
        x = torch.randn(4, 48, device=device, requires_grad=True)
        w = torch.randn(48, device=device, requires_grad=True)
        fn(x, x, w).sum().backward()
    x2, w2 = x.detach().requires_grad_(), w.detach().requires_grad_()
    torch.nn.functional.rms_norm(x2 + x2, [48], w2, None).mul(2.0).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)
    torch.testing.assert_close(w.grad, w2.grad)
