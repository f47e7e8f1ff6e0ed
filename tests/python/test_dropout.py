"""Dropout (ops/dropout.h): TorchScript's autodiff writes a module's dropout as
native_dropout(x, p, self.training) and its gradient as native_dropout_backward(grad,
mask, scale). Groups branch on self.training: in eval mode dropout is a copy and a mask
of ones, in training a Philox mask (codegen/philox.h) drawn from torch's generator, the
same in the kernels and in the interpreter's fuser::philox_dropout. Random masks differ
from eager's, so training results are checked against eager's formula on the mask the
kernel drew (recovered from its output) and against the interpreter's draw."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

import fuser
from helpers import FUSION_GROUP, all_nodes, count_kind, devices, fused_kinds


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


def script_own_class(cls: type[nn.Module], device: str, *args: Any) -> Any:
    """cls(*args) on `device`, scripted as a subclass of its own: scripted modules of one
    class share their graph executors, so another test's (another device's) graphs
    would meet this one's calls in their guards."""
    own_class = type(f"{cls.__name__}_{device}", (cls,), {})
    return torch.jit.script(own_class(*args).to(device))


def fused_steps(module: nn.Module, x: torch.Tensor) -> tuple[tuple[torch.Tensor, ...], Any]:
    """Four training steps of `module` with the fuser on, stats reset first: the last
    step's results and the backward's optimized graph. CUDA backwards run on autograd's
    device thread, whose last graph this thread would not see: they run here."""
    fuser.reset_stats()
    with fuser.enabled(True), torch.autograd.set_multithreading_enabled(False):
        for _ in range(4):
            got = step(module, x)
        return got, torch.jit.last_executed_optimized_graph()


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
    got, backward = fused_steps(scripted, x)
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


class AttentionTail(nn.Module):
    """Attention's last steps: softmax, dropout, the product with the values. Autodiff's
    forward saves the probabilities (for softmax's backward) and the dropout's output
    (for the product's)."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.drop = nn.Dropout(p)

    def forward(self, s: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return self.drop(torch.softmax(s * 0.5, -1)) @ v


def eval_dropout_readers(graph: Any) -> list[int]:
    """For each eval-mode native_dropout in the fusion groups of `graph` (autodiff's
    forward graphs included): how many nodes of its group read its output, the copy."""
    readers = []
    for node in all_nodes(graph):
        if node.kind() == "prim::DifferentiableGraph":
            readers += eval_dropout_readers(node.g("Subgraph"))
        if node.kind() != FUSION_GROUP:
            continue
        for inner in node.g("Subgraph").nodes():
            if inner.kind() == "aten::native_dropout" and inner.inputsAt(2).toIValue() is False:
                readers.append(len(inner.outputsAt(0).uses()))
    return readers


def attention_step(module: nn.Module, s: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, ...]:
    out = module(s, v)
    return (out, *torch.autograd.grad((out * out).sum(), [s, v]))


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize(("p", "training"), [(0.1, False), (0.0, True)], ids=["eval", "p0"])
def test_a_dropout_that_keeps_everything_writes_no_copy(
    device: str, p: float, training: bool
) -> None:
    """Eval mode (or p 0 in training, which keeps every element too): the forward group
    computes the mask of ones autodiff saves, and its output is the probabilities
    themselves, as eager's dropout returns its input, so the group writes no copy of
    them; p 0 draws no random numbers (eager's dropout of p 0 draws none either), and
    its group is not copied per value of self.training."""
    torch.manual_seed(0)
    eager = AttentionTail(p).to(device).train(training)
    scripted = script_own_class(AttentionTail, device, p).train(training)
    s = torch.randn(4, 2, 32, 32, device=device, requires_grad=True)
    v = torch.randn(4, 2, 32, 16, device=device, requires_grad=True)

    def generator_state() -> torch.Tensor:
        return torch.cuda.get_rng_state() if device == "cuda" else torch.get_rng_state()

    with fuser.enabled(True), torch.autograd.set_multithreading_enabled(False):
        for _ in range(3):  # profiling (eager's native_dropout draws there), optimizing
            attention_step(scripted, s, v)
        before = generator_state()
        fuser.reset_stats()
        for _ in range(2):
            got = attention_step(scripted, s, v)
        after = generator_state()
        forward = scripted.graph_for(s, v)
    for g, w in zip(got, attention_step(eager, s, v), strict=True):
        assert (g.dtype, g.stride()) == (w.dtype, w.stride())
        torch.testing.assert_close(g, w)
    assert eval_dropout_readers(forward) == [0], forward
    assert fuser.stats()["guard_failures"] == 0, fuser.stats()
    if p == 0:  # no branch on self.training either: one group, no training copy
        assert "fuser::philox_dropout" not in fused_kinds(forward), forward
        assert count_kind(forward, "fuser::philox_state") == 0, forward
        assert torch.equal(before, after)


class ProbabilitiesAndDropped(nn.Module):
    """Returns softmax's probabilities and their dropout, as a model that also hands
    back its attention weights."""

    def __init__(self) -> None:
        super().__init__()
        self.drop = nn.Dropout(0.25)

    def forward(self, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = torch.softmax(s * 2.0, -1)
        return a, self.drop(a)


def test_an_eval_dropout_returned_beside_its_input_is_that_input() -> None:
    """A graph that returns both an eval-mode dropout's input and its output: they are
    one tensor, as eager's dropout (and PyTorch's decomposition of native_dropout)
    returns its input; every gradient is eager's, each output's counted once."""
    eager = ProbabilitiesAndDropped().eval()
    scripted = script_own_class(ProbabilitiesAndDropped, "cpu").eval()
    s = torch.randn(8, 32, requires_grad=True)
    w1, w2 = torch.randn(8, 32), torch.randn(8, 32)

    def gradient(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.autograd.grad((a * w1).sum() + (b * b * w2).sum(), [s])[0]

    with fuser.enabled(True):
        for _ in range(4):
            a, b = scripted(s)
            got = gradient(a, b)
        forward = scripted.graph_for(s)
    want_a, want_b = eager(s)
    assert a.data_ptr() == b.data_ptr() and want_a.data_ptr() == want_b.data_ptr()
    torch.testing.assert_close(a, want_a)
    torch.testing.assert_close(got, gradient(want_a, want_b))
    assert eval_dropout_readers(forward) == [0], forward


def kept_mask(out: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Where a dropout's output kept its (nonzero) input, among the elements whose input
    is not zero (`live`), so the mask can be read back from the output."""
    live = value != 0
    return (out != 0) & live, live


def assert_keep_fraction(kept: torch.Tensor, live: torch.Tensor, p: float) -> None:
    """The kept fraction of the live elements is 1 - p within 5 binomial deviations."""
    n = live.sum().item()
    fraction = kept.sum().item() / n
    assert abs(fraction - (1 - p)) <= 5 * ((p * (1 - p) / n) ** 0.5) + 1e-9, (fraction, n)


TRAIN_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


class TrainBlock(nn.Module):
    """Without a residual, a kept element is nonzero in the output and the mask reads
    back exactly in every dtype (x + a small kept value may round to x); without a
    GEMM, 16-bit results are eager's to the rounding (CPU linear rounds once where
    its bias epilogue, split off, rounds twice)."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(16))
        self.drop = nn.Dropout(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(torch.relu(x * self.weight * 2.0)) * 3.0


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", TRAIN_DTYPES, ids=str)
def test_training_step_fuses_random_dropout_and_its_gradient(
    device: str, dtype: torch.dtype
) -> None:
    """In training mode the forward group draws the mask, the backward group multiplies
    the gradient by that very mask: the output and every gradient equal eager's formula
    on the mask read back from the output."""
    torch.manual_seed(0)
    eager = TrainBlock(0.5).to(device, dtype)
    scripted = torch.jit.script(TrainBlock(0.5).to(device, dtype))
    scripted.load_state_dict(eager.state_dict())
    x = torch.randn(256, 16, device=device, dtype=dtype, requires_grad=True)
    got, backward = fused_steps(scripted, x)
    with fuser.enabled(True):
        forward = scripted.graph_for(x)
    stats = fuser.stats()
    assert stats["kernel_launches"] >= 4 and stats["interpreted_runs"] == 0, stats
    assert stats["cuda_cross_compile_failures"] == 0, stats
    assert "fuser::philox_dropout" in fused_kinds(forward), forward
    assert "aten::native_dropout_backward" in fused_kinds(backward), backward

    with torch.no_grad():
        value = torch.relu(x * eager.weight * 2.0)
    kept, live = kept_mask(got[0], value)
    assert_keep_fraction(kept, live, 0.5)
    # Eager's formula with that mask: relu(x * weight * 2) * mask * 2 * 3.
    out = torch.relu(x * eager.weight * 2.0) * kept.to(dtype) * 2.0 * 3.0
    want = (out, *torch.autograd.grad(out.sum(), [x, *eager.parameters()]))
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert (g.dtype, g.stride()) == (w.dtype, w.stride())
        torch.testing.assert_close(g, w, msg=lambda m, i=i: f"result {i}: {m}")


@pytest.mark.parametrize("device", devices())
def test_eval_and_training_modes_switch_in_one_scripted_module(device: str) -> None:
    """self.training is a branch between two groups: switching modes back and forth
    runs both kernels, never the fallback."""
    torch.manual_seed(0)
    eager = Block(0.25).to(device)
    scripted = script_own_class(Block, device, 0.25)
    scripted.load_state_dict(eager.state_dict())
    x = torch.randn(64, 16, device=device, requires_grad=True)
    with fuser.enabled(True):
        for call, mode in enumerate([True, False] * 4):
            scripted.train(mode)
            eager.train(mode)
            fuser.reset_stats()
            got = step(scripted, x)
            stats = fuser.stats()
            if call >= 4:  # past profiling, each mode launches its kernels, no fallback
                assert stats["interpreted_runs"] == 0 and stats["guard_failures"] == 0, stats
                assert stats["kernel_launches"] >= 2, (mode, stats)
            if not mode:
                for g, w in zip(got, step(eager, x), strict=True):
                    torch.testing.assert_close(g, w)


def random_dropout_fn() -> torch.jit.ScriptFunction:
    """A fresh scripted copy (the executor caches per function)."""
    unit = torch.jit.CompilationUnit(
        "def g(x):\n    return torch.nn.functional.dropout(x * 2.0, 0.4, True)\n"
    )
    return unit.g


def layouts(device: str) -> dict[str, torch.Tensor]:
    torch.manual_seed(1)
    x = torch.randn(4, 6, 8, 10, device=device)
    return {
        "contiguous": x,
        "channels_last": x.to(memory_format=torch.channels_last),
        "transposed": x.transpose(1, 3),
    }


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "transposed"])
def test_manual_seed_reproduces_the_mask_the_interpreter_draws(device: str, layout: str) -> None:
    """The kernel's mask is a function of the state torch's generator gives: the same
    seed gives the same output, the next call another, and fuser::philox_dropout in
    the interpreter, given the state drawn after the same seed, the same output and
    strides as eager's dropout."""
    x = layouts(device)[layout]
    fn = random_dropout_fn()
    with fuser.enabled(True):
        for _ in range(3):
            fn(x)
        kinds = fused_kinds(fn.graph_for(x))
        fuser.reset_stats()
        torch.manual_seed(7)
        first = fn(x)
        again = fn(x)
        torch.manual_seed(7)
        repeated = fn(x)
    assert "fuser::philox_dropout" in kinds, kinds
    assert fuser.stats()["interpreted_runs"] == 0, fuser.stats()
    assert torch.equal(first, repeated)
    assert not torch.equal(first, again)
    assert first.stride() == torch.nn.functional.dropout(x * 2.0, 0.4, True).stride()

    torch.manual_seed(7)
    seed, offset = torch.ops.fuser.philox_state(x.device, 0.4)
    cpu_scale_in_dtype = x.device.type == "cpu"  # aten::dropout's CPU formula
    out, mask = torch.ops.fuser.philox_dropout(x * 2.0, 0.4, seed, offset, cpu_scale_in_dtype)
    torch.testing.assert_close(first, out, rtol=0, atol=0)
    kept, live = kept_mask(first, x)
    assert torch.equal(kept, mask & live)
    assert_keep_fraction(kept, live, 0.4)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", TRAIN_DTYPES, ids=str)
def test_kept_elements_are_scaled_as_eager_scales_them(device: str, dtype: torch.dtype) -> None:
    """aten::dropout keeps x * 1 / (1 - p): on the CPU eager rounds the scale to the
    dtype first (a mask of x's dtype divided by 1 - p), on CUDA it scales in float."""
    torch.manual_seed(2)
    x = torch.randn(64, 257, device=device).to(dtype)
    fn = random_dropout_fn()
    with fuser.enabled(True):
        for _ in range(3):
            got = fn(x)
    kept, live = kept_mask(got, x)
    assert_keep_fraction(kept, live, 0.4)
    doubled = x * 2.0
    if device == "cpu":
        scaled = doubled * kept.to(dtype).div_(0.6)
    else:
        scaled = doubled.mul(kept).mul_(1 / 0.6)
    torch.testing.assert_close(got, scaled, rtol=0, atol=0)


@pytest.mark.parametrize("device", devices())
def test_p_zero_and_one(device: str) -> None:
    """p = 1 drops every element (a mask of False, signed zeros like eager's x * 0);
    p = 0 keeps every one."""
    unit = torch.jit.CompilationUnit(
        "def f(x):\n"
        "    y, m = torch.native_dropout(x * 2.0, 1.0, True)\n"
        "    z, n = torch.native_dropout(x + 1.0, 0.0, True)\n"
        "    return y * 1.0, m, z * 1.0, n\n"
    )
    x = torch.randn(16, 33, device=device)
    with fuser.enabled(True):
        for _ in range(3):
            y, m, z, n = unit.f(x)
        kinds = fused_kinds(unit.f.graph_for(x))
    assert "fuser::philox_dropout" in kinds, kinds
    assert not m.any() and n.all()
    assert torch.equal(torch.signbit(y), torch.signbit(x * 2.0 * 0.0)) and not y.any()
    torch.testing.assert_close(z, x + 1.0, rtol=0, atol=0)


@pytest.mark.parametrize("device", devices())
def test_attention_dropout_joins_the_softmax_row_kernel(device: str) -> None:
    """dropout(softmax(scores)) is one row kernel; kept probabilities are scaled."""
    unit = torch.jit.CompilationUnit(
        "def f(s):\n"
        "    return torch.nn.functional.dropout(torch.softmax(s * 0.125, -1), 0.1, True)\n"
    )
    scores = torch.randn(8, 4, 64, 64, device=device)
    fuser.reset_stats()
    with fuser.enabled(True):
        for _ in range(3):
            got = unit.f(scores)
        kinds = fused_kinds(unit.f.graph_for(scores))
    assert {"aten::softmax", "fuser::philox_dropout"} <= kinds, kinds
    assert fuser.stats()["row_launches"] >= 1 and fuser.stats()["interpreted_runs"] == 0
    probs = torch.softmax(scores * 0.125, -1)
    kept, live = kept_mask(got, probs)
    assert_keep_fraction(kept, live, 0.1)
    torch.testing.assert_close(got[kept], (probs / 0.9)[kept])


class TunableDropout(nn.Module):
    """p is an attribute, not a constant: the kernel reads it per call."""

    def __init__(self) -> None:
        super().__init__()
        self.p = 0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.dropout(x * 2.0, self.p, self.training) + 1.0


@pytest.mark.parametrize("device", devices())
def test_a_probability_outside_0_1_raises_as_eager(device: str) -> None:
    module = torch.jit.script(TunableDropout().to(device))
    x = torch.randn(32, 8, device=device, requires_grad=True)
    with fuser.enabled(True):
        for _ in range(3):
            module(x).sum().backward()
        module.p = 1.5
        # F.dropout checks p itself; a state drawn for native_dropout checks it as eager.
        with pytest.raises(torch.jit.Error, match="dropout probability has to be between 0 and 1"):
            module(x)
    with pytest.raises(RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\]"):
        torch.ops.fuser.philox_state(x.device, 1.5)


def test_eval_dropout_of_a_frozen_model_is_its_input() -> None:
    """aten::dropout(x, p, False) returns x itself in eager; a frozen eval model keeps
    no dropout between its groups."""
    torch.manual_seed(0)
    model = Block(0.2).eval()
    x = torch.randn(8, 16)
    with torch.no_grad(), fuser.enabled(True):
        state = Block(0.2).eval()
        state.load_state_dict(model.state_dict())
        frozen = torch.jit.freeze(torch.jit.script(state))
        for _ in range(3):
            got = frozen(x)
        graph = torch.jit.last_executed_optimized_graph()
    assert "aten::dropout" not in str(graph), graph
    torch.testing.assert_close(got, model(x))


class ZeroDropout(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.drop = nn.Dropout(0.0)  # p is a constant of nn.Dropout's scripted forward

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(x * 2.0) + 1.0


def test_a_dropout_of_p_zero_is_its_input_in_both_modes() -> None:
    """aten::dropout(x, 0, self.training) returns x itself in eager in either mode: the
    graph keeps no dropout and no branch on self.training."""
    scripted = script_own_class(ZeroDropout, "cpu")
    x = torch.randn(8, 16)
    with torch.no_grad(), fuser.enabled(True):
        for mode in [True, False] * 2:
            scripted.train(mode)
            for _ in range(3):
                got = scripted(x)
            graph = torch.jit.last_executed_optimized_graph()
            assert "aten::dropout" not in str(graph) and "philox" not in str(graph), graph
            torch.testing.assert_close(got, x * 2.0 + 1.0, rtol=0, atol=0)


class InferenceBlock(nn.Module):
    """A transformer-style epilogue: dropout between elementwise ops, as a scripted (not
    frozen) module runs it under no_grad: aten::dropout(x, p, self.training)."""

    def __init__(self) -> None:
        super().__init__()
        self.drop = nn.Dropout(0.2)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.drop(torch.nn.functional.gelu(x + y)) * 2.0 + y


@pytest.mark.parametrize("device", devices())
def test_a_modules_dropout_switch_fuses_under_no_grad(device: str) -> None:
    """aten::dropout reading self.training joins its neighbours in both modes: in eval
    mode a copy (eager's output equals its input), in training a random mask."""
    scripted = script_own_class(InferenceBlock, device)
    eager = InferenceBlock().to(device)
    x, y = torch.randn(64, 128, device=device), torch.randn(64, 128, device=device)
    with torch.no_grad(), fuser.enabled(True):
        for call, mode in enumerate([False, True] * 3):
            scripted.train(mode)
            eager.train(mode)
            fuser.reset_stats()
            got = scripted(x, y)
            stats = fuser.stats()
            if call < 2:  # profiling
                continue
            assert stats["kernel_launches"] == 1 and stats["interpreted_runs"] == 0, stats
            assert stats["guard_failures"] == 0, stats
            if mode:
                kept, live = kept_mask(got - y, torch.nn.functional.gelu(x + y))
                assert_keep_fraction(kept, live, 0.2)
            else:
                want = eager(x, y)
                assert got.stride() == want.stride()
                torch.testing.assert_close(got, want)
        kinds = fused_kinds(scripted.graph_for(x, y))
    assert {"aten::dropout", "aten::gelu"} <= kinds, kinds


def test_a_switched_dropout_of_a_strided_view_stays_with_aten() -> None:
    """Eager's eval-mode dropout returns its input itself: a view with gaps keeps its
    strides, which a fused copy would not; such a dropout is not fused. A dense
    transposed input keeps its strides in the fused copy too."""
    source = (
        "def f(x, training: bool):\n"
        "    d = torch.nn.functional.dropout(VIEW, 0.3, training)\n"
        "    return d, d * 2.0\n"
    )
    strided_fn = torch.jit.CompilationUnit(source.replace("VIEW", "x[:, ::2]")).f
    transposed_fn = torch.jit.CompilationUnit(source.replace("VIEW", "x.t() * 1.0")).f
    x = torch.randn(16, 10)
    with torch.no_grad(), fuser.enabled(True):
        for _ in range(3):
            strided, _ = strided_fn(x, False)
            transposed, _ = transposed_fn(x, False)
        strided_kinds = fused_kinds(strided_fn.graph_for(x, False))
        transposed_kinds = fused_kinds(transposed_fn.graph_for(x, False))
    assert "aten::dropout" not in strided_kinds, strided_kinds
    assert "aten::dropout" in transposed_kinds, transposed_kinds
    assert strided.stride() == x[:, ::2].stride()
    assert transposed.stride() == (x.t() * 1.0).stride()
    torch.testing.assert_close(strided, x[:, ::2])
    torch.testing.assert_close(transposed, x.t())


@pytest.mark.parametrize("device", devices())
def test_an_offset_that_leaves_the_draw_to_aten_runs_atens_dropout(device: str) -> None:
    # fuser::philox_state answers offset -1 while a CUDA graph is captured (the generator
    # cannot be read then; tests/python/test_cuda_graphs.py captures it): the interpreted
    # dropout then draws with ATen's native_dropout, a fresh mask per call.
    torch.manual_seed(0)
    x = torch.rand(64, 256, device=device) + 0.5
    torch.manual_seed(1)
    first, kept = torch.ops.fuser.philox_dropout(x, 0.25, 0, -1, False)
    second, _ = torch.ops.fuser.philox_dropout(x, 0.25, 0, -1, False)
    torch.manual_seed(1)
    want, want_kept = torch.native_dropout(x, 0.25, True)
    assert kept.dtype == torch.bool and first.dtype == x.dtype
    assert torch.equal(first, want) and torch.equal(kept, want_kept)
    assert not torch.equal(first, second)
