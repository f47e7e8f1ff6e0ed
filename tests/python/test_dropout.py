"""Dropout in training graphs (ops/dropout.h): TorchScript's autodiff writes a module's
dropout as native_dropout(x, p, self.training) and its gradient as
native_dropout_backward(grad, mask, scale). In eval mode the guard pins `training` to
False and both join their neighbours' groups; in training mode the fallback runs eager's
random dropout."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import fuser
from helpers import devices, fused_kinds


class Block(nn.Module):
    def __init__(self, p: float) -> None:
        super().__init__()
        self.linear = nn.Linear(16, 16)
        self.drop = nn.Dropout(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(torch.relu(self.linear(x) * 2.0)) + x


def step(module: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The forward result and the gradients of x and every weight."""
    out = module(x)
    return (out, *torch.autograd.grad(out.sum(), [x, *module.parameters()]))


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_eval_mode_training_step_fuses_dropout_and_its_gradient(
    device: str, dtype: torch.dtype
) -> None:
    torch.manual_seed(0)
    eager = Block(0.1).to(device, dtype).eval()
    scripted = torch.jit.script(Block(0.1).to(device, dtype).eval())
    scripted.load_state_dict(eager.state_dict())
    x = torch.randn(8, 16, device=device, dtype=dtype, requires_grad=True)
    fuser.reset_stats()
    with fuser.enabled(True):
        for _ in range(4):
            got = step(scripted, x)
        backward = torch.jit.last_executed_optimized_graph()
    for g, w in zip(got, step(eager, x), strict=True):
        assert (g.dtype, g.stride()) == (w.dtype, w.stride())
        torch.testing.assert_close(g, w)
    stats = fuser.stats()
    assert stats["kernel_launches"] >= 4 and stats["interpreted_runs"] == 0, stats
    assert stats["cuda_cross_compile_failures"] == 0, stats  # FUSER_CROSS_COMPILE in CI
    assert "aten::native_dropout_backward" in fused_kinds(backward), backward


@pytest.mark.parametrize("device", devices())
def test_the_forward_group_holds_the_dropout(device: str) -> None:
    """The forward graph's group computes mul, relu and the eval-mode dropout (a copy and
    a mask of ones) in one kernel."""
    module = torch.jit.script(Block(0.3).to(device).eval())
    x = torch.randn(4, 16, device=device, requires_grad=True)
    with fuser.enabled(True):
        for _ in range(3):
            module(x).sum().backward()
        forward = module.graph_for(x)
    assert {"aten::native_dropout", "aten::relu"} <= fused_kinds(forward), forward


@pytest.mark.parametrize("device", devices())
def test_training_mode_runs_eagers_random_dropout(device: str) -> None:
    """After .train() the guard's pinned `training` fails: eager's dropout drops about p
    of the elements, scales the rest by 1 / (1 - p), and the gradient sees the same
    mask."""
    torch.manual_seed(0)
    module = torch.jit.script(Block(0.5).to(device).eval())
    x = torch.randn(64, 16, device=device, requires_grad=True)
    with fuser.enabled(True):
        for _ in range(3):
            step(module, x)
        module.train()
        out, grad_x, *_ = step(module, x)
        out, grad_x, *_ = step(module, x)
    with torch.no_grad():
        kept_value = torch.relu(module.linear(x) * 2.0) * 2.0  # scaled by 1 / (1 - 0.5)
    dropped = (out - x).abs() < 1e-6
    live = kept_value.abs() > 1e-3
    fraction = (dropped & live).sum().item() / live.sum().item()
    assert 0.35 < fraction < 0.65, fraction
    torch.testing.assert_close((out - x)[~dropped], kept_value[~dropped])


def test_a_float_mask_stays_with_aten() -> None:
    """native_dropout_backward fuses a bool mask only (eager's CPU training masks have
    the input's dtype)."""
    text = (
        "def f(g, mask, scale: float):\n"
        "    return torch.ops.aten.native_dropout_backward(g * 2.0, mask, scale) + 1.0\n"
    )
    fn = torch.jit.CompilationUnit(text).f
    g, mask = torch.randn(4, 5), (torch.rand(4, 5) > 0.5).float()
    with fuser.enabled(True):
        for _ in range(3):
            got = fn(g, mask, 2.0)
        kinds = fused_kinds(fn.graph_for(g, mask, 2.0))
    torch.testing.assert_close(got, g * 2.0 * mask * 2.0 + 1.0)
    assert "aten::native_dropout_backward" not in kinds, kinds
