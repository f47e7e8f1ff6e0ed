"""batch_norm with batch statistics (passes/batch_norm_training.cpp): the per-sample,
per-channel means and variances are one row group over the trailing dims,
fuser::batch_norm_batch_stats combines them over the batch and updates the running
statistics in place, and the normalization is an inference batch_norm
(fuser::batch_norm_with_stats) that the elementwise group after it fuses. Outputs,
running statistics, num_batches_tracked and gradients equal eager's, in training and
eval mode, with and without gradients; what the row kernel cannot read well
(channels-last inputs), a batch_norm nothing fusible reads, and missing running
statistics stay with ATen."""

from __future__ import annotations

import copy

import pytest
import torch

import fuser
from helpers import FUSION_GROUP, all_nodes, devices, eager_from_source, script_from_source

BATCH_STATS = "fuser::batch_norm_batch_stats"
BATCH_STATS_FOR_BACKWARD = "fuser::batch_norm_batch_stats_for_backward"
WITH_STATS = "fuser::batch_norm_with_stats"

TOLERANCE = {
    torch.float16: {"rtol": 5e-3, "atol": 5e-3},
    torch.bfloat16: {"rtol": 3e-2, "atol": 3e-2},
    torch.float32: {"rtol": 2e-5, "atol": 2e-5},
    torch.float64: {"rtol": 1e-10, "atol": 1e-10},
}

FUNCTIONAL = """
def f(x, w, b, mean, var):
    return torch.batch_norm(x, w, b, mean, var, True, 0.1, 1e-5, True).relu()
"""


def kinds_of(graph: torch._C.Graph) -> set[str]:
    """Node kinds of `graph`, autodiff's subgraphs included, and "group:" + the kinds
    its fusion groups hold."""
    kinds = set()
    for node in all_nodes(graph):
        kinds.add(node.kind())
        if node.kind() == FUSION_GROUP:
            kinds |= {"group:" + k for k in kinds_of(node.g("Subgraph"))}
        elif node.kind() == "prim::DifferentiableGraph":
            kinds |= kinds_of(node.g("Subgraph"))
    return kinds


def affine(c: int, dtype: torch.dtype, device: str) -> list[torch.Tensor]:
    """weight, bias, running mean, running variance (positive)."""
    g = torch.Generator().manual_seed(1)
    w = torch.rand(c, generator=g) + 0.5
    b = torch.randn(c, generator=g)
    mean = torch.randn(c, generator=g)
    var = torch.rand(c, generator=g) + 0.5
    return [t.to(device, dtype) for t in (w, b, mean, var)]


def inputs(shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: int) -> torch.Tensor:
    """Far from zero mean, with channels of different scales: the centring matters."""
    g = torch.Generator().manual_seed(seed)
    scale = torch.rand(shape[1], generator=g) * 3 + 0.5
    shift = torch.randn(shape[1], generator=g) * 4
    view = [1, shape[1]] + [1] * (len(shape) - 2)
    x = torch.randn(shape, generator=g) * scale.view(view) + shift.view(view)
    return x.to(device, dtype)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize(
    "dtype,stats_dtype",
    [
        (torch.float32, torch.float32),
        (torch.float64, torch.float64),
        (torch.bfloat16, torch.float32),
        (torch.float16, torch.float32),
        # A model made float16 or bfloat16 whole: 16-bit running statistics, updated in
        # float and rounded once.
        (torch.bfloat16, torch.bfloat16),
        (torch.float16, torch.float16),
    ],
)
# (70, 13, 3, 3): more samples than a warp's lanes, channels not a multiple of a block's
# 8 (the CUDA combining kernel, runtime/batch_norm_statistics.cpp).
@pytest.mark.parametrize(
    "shape", [(4, 8, 5, 5), (3, 6, 17), (2, 4, 3, 5, 6), (16, 8, 1, 1), (70, 13, 3, 3)]
)
def test_functional_training_matches_eager(
    device: str, dtype: torch.dtype, stats_dtype: torch.dtype, shape: tuple[int, ...]
) -> None:
    fn = script_from_source(FUNCTIONAL)
    ref = eager_from_source(FUNCTIONAL)
    w, b, mean, var = affine(shape[1], stats_dtype, device)
    ours_mean, ours_var = mean.clone(), var.clone()
    # Eager's CPU kernels round 16-bit running statistics' batch statistics to 16 bits
    # before normalizing; ours keep them in float, as eager's CUDA kernels do: both are
    # held to float64's results there.
    exact = stats_dtype in (torch.float16, torch.bfloat16)
    ref_w, ref_b, ref_mean, ref_var = w, b, mean, var
    if exact:
        ref_w, ref_b, ref_mean, ref_var = (t.double() for t in (w, b, mean, var))
    with fuser.enabled(True):
        for call in range(4):
            x = inputs(shape, dtype, device, seed=call)
            got = fn(x, w, b, ours_mean, ours_var)
            want = ref(x.double() if exact else x, ref_w, ref_b, ref_mean, ref_var)
            assert got.dtype == dtype and got.stride() == want.stride()
            want = want.to(dtype)
            torch.testing.assert_close(got, want, **TOLERANCE[dtype])
            tolerance = TOLERANCE[stats_dtype]
            torch.testing.assert_close(ours_mean, ref_mean.to(stats_dtype), **tolerance)
            torch.testing.assert_close(ours_var, ref_var.to(stats_dtype), **tolerance)
            assert ours_mean.dtype == ours_var.dtype == stats_dtype
    kinds = kinds_of(fn.graph_for(x, w, b, ours_mean, ours_var))
    assert BATCH_STATS in kinds
    assert {
        "group:aten::var_mean",
        "group:" + WITH_STATS,
        "group:aten::relu",
    } <= kinds
    assert "aten::batch_norm" not in kinds
    # x read in its computation dtype inside the statistics' group, never copied outside.
    assert "group:aten::_to_copy" in kinds and "aten::_to_copy" not in kinds
    if device == "cuda" and exact:  # the combining kernel of this pair of dtypes ran
        assert fuser.stats()["batch_statistics_kernels"] > 0


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize(
    "first,then",
    [
        (torch.float16, torch.float64),
        (torch.float32, torch.bfloat16),
        (torch.bfloat16, torch.float32),
    ],
)
def test_dtype_changes_after_profiling(device: str, first: torch.dtype, then: torch.dtype) -> None:
    """A plan profiled and optimized in one dtype (input, weights and running statistics
    all of it) then called in another: the guards send the groups to their fallbacks and
    the statistics are computed in the new dtype's computation dtype (float64 keeps
    float64's precision), the running statistics updated in their own dtype, and for
    training with gradients the backward gets saved statistics it takes."""
    fn = script_from_source(FUNCTIONAL)
    shape = (4, 6, 5, 5)
    fuser._C._set_report_capture(True)
    try:
        with fuser.enabled(True):
            for dtype, calls in [(first, 3), (then, 2)]:
                w, b, mean, var = affine(6, torch.float64, device)
                ours_mean, ours_var = mean.to(dtype), var.to(dtype)
                for call in range(calls):
                    x = inputs(shape, dtype, device, seed=call)
                    leaves = [t.to(dtype).requires_grad_() for t in (w, b)]
                    exact = [t.clone().requires_grad_() for t in (w, b)]
                    got = fn(x, *leaves, ours_mean, ours_var)
                    want = eager_from_source(FUNCTIONAL)(x.double(), *exact, mean, var)
                    assert got.dtype == dtype
                    torch.testing.assert_close(got, want.to(dtype), **TOLERANCE[dtype])
                    torch.testing.assert_close(ours_mean, mean.to(dtype), **TOLERANCE[dtype])
                    torch.testing.assert_close(ours_var, var.to(dtype), **TOLERANCE[dtype])
                    assert ours_mean.dtype == dtype
                    grads = torch.autograd.grad(got.sum(), leaves)
                    want_grads = torch.autograd.grad(want.sum(), exact)
                    for g, e in zip(grads, want_grads, strict=True):
                        assert g.dtype == dtype
                        # In 16 bits an output at zero may round to either side of the
                        # ReLU: a share of the largest gradient (a channel's count).
                        close = {"rtol": 0, "atol": 0.05 * e.abs().max().item()}
                        wide = dtype in (torch.float16, torch.bfloat16)
                        torch.testing.assert_close(
                            g, e.to(dtype), **(close if wide else TOLERANCE[dtype])
                        )
                if dtype == first:  # the plan the second dtype meets: the statistics fused
                    graphs = fuser._C._take_captured_graphs()
                    fuser._C._set_report_capture(False)
                    kinds = set().union(*(kinds_of(g) for g in graphs))
                    assert {BATCH_STATS_FOR_BACKWARD, "group:" + WITH_STATS} <= kinds
    finally:
        fuser._C._set_report_capture(False)


def block(bn: torch.nn.Module, device: str) -> torch.nn.Module:
    """BatchNorm, a residual add and ReLU (both readers of the batch_norm fuse), of a
    class of its own: torch.jit.script keeps one executor per class and method, which
    would carry plans from one test to the next."""

    class BnBlock(torch.nn.Module):
        def __init__(self, bn: torch.nn.Module) -> None:
            super().__init__()
            self.bn = bn

        def forward(self, x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.bn(x) + r)

    model = BnBlock(bn).to(device)
    with torch.no_grad():
        model.bn.running_mean.uniform_(-1, 1)
        model.bn.running_var.uniform_(0.5, 2)
        if model.bn.weight is not None:
            model.bn.weight.uniform_(0.5, 1.5)
            model.bn.bias.uniform_(-1, 1)
    return model


def assert_same_state(scripted: torch.nn.Module, model: torch.nn.Module) -> None:
    for (name, ours), (_, theirs) in zip(
        scripted.state_dict().items(), model.state_dict().items(), strict=True
    ):
        torch.testing.assert_close(ours, theirs, msg=name, rtol=2e-5, atol=2e-5)


BN_MODULES = {
    "bn2d": lambda: torch.nn.BatchNorm2d(6),
    "bn1d_3d": lambda: torch.nn.BatchNorm1d(6),
    "bn3d": lambda: torch.nn.BatchNorm3d(6),
    "no_affine": lambda: torch.nn.BatchNorm2d(6, affine=False),
    "cumulative": lambda: torch.nn.BatchNorm2d(6, momentum=None),
}
SHAPES = {"bn2d": (4, 6, 7, 7), "bn1d_3d": (5, 6, 9), "bn3d": (2, 6, 3, 4, 5)}


def shape_of(kind: str) -> tuple[int, ...]:
    return SHAPES.get(kind, SHAPES["bn2d"])


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("kind", list(BN_MODULES))
def test_module_without_gradients_in_training_then_eval(device: str, kind: str) -> None:
    """Under no_grad: training mode normalizes with the batch's statistics and updates
    the running ones (momentum None: the cumulative average over num_batches_tracked);
    eval mode then reads the running ones, and training again the batch's."""
    model = block(BN_MODULES[kind](), device).train()
    scripted = torch.jit.script(copy.deepcopy(model))
    shape = shape_of(kind)
    with torch.no_grad(), fuser.enabled(True):
        for mode in ["train", "eval", "train"]:
            model.train(mode == "train")
            scripted.train(mode == "train")
            for call in range(3):
                x = inputs(shape, torch.float32, device, call)
                r = inputs(shape, torch.float32, device, 9)
                torch.testing.assert_close(scripted(x, r), model(x, r), **TOLERANCE[torch.float32])
                assert_same_state(scripted, model)
        graph = torch.jit.last_executed_optimized_graph()
    assert BATCH_STATS in kinds_of(graph)
    assert fuser.stats()["kernel_launches"] > 0


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("affine_", [True, False], ids=["affine", "no_affine"])
def test_16bit_model_trains_and_evaluates(device: str, dtype: torch.dtype, affine_: bool) -> None:
    """A BatchNorm block made float16 or bfloat16 whole (`.to(dtype)`: 16-bit weights and
    running statistics), with gradients: the batch statistics fuse as in float32, and the
    outputs, every gradient and the running statistics (which keep their dtype) match
    a float64 copy of the model over training steps and in eval mode. (Eager's CPU
    kernels round the batch statistics to 16 bits; ours keep them in float, as eager's
    CUDA kernels do; on CUDA outputs and running statistics also match eager's 16-bit
    model to a rounding.) SiLU rather than ReLU: a sum at zero rounds to either side in
    16 bits, and a ReLU's gradient there is all or nothing."""

    class SmoothBlock(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bn = block(torch.nn.BatchNorm2d(6, affine=affine_), device).bn

        def forward(self, x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.silu(self.bn(x) + r)

    torch.manual_seed(0)  # block() draws the running statistics and the affine parameters
    model = SmoothBlock().to(device, dtype).train()
    exact = copy.deepcopy(model).double()
    eager = copy.deepcopy(model)
    scripted = torch.jit.script(model)
    shape = shape_of("bn2d")
    weights = torch.randn(shape, generator=torch.Generator().manual_seed(5)).to(device, dtype)
    tolerance = TOLERANCE[dtype]
    # Two roundings of the format (eager's CUDA kernels compute as ours do).
    rounding = {"rtol": 2 * torch.finfo(dtype).eps, "atol": 2 * torch.finfo(dtype).eps}
    fuser._C._set_report_capture(True)
    try:
        with fuser.enabled(True), torch.autograd.set_multithreading_enabled(False):
            for mode in ["train", "eval"]:
                for m in (exact, eager, scripted):
                    m.train(mode == "train")
                for call in range(4):
                    x = inputs(shape, dtype, device, call)
                    r = inputs(shape, dtype, device, 7)
                    ours = [t.clone().requires_grad_() for t in (x, r)]
                    truth = [t.double().requires_grad_() for t in (x, r)]
                    out, grads = grads_of(scripted, *ours, list(scripted.parameters()), weights)
                    want, want_grads = grads_of(exact, *truth, list(exact.parameters()), weights)
                    assert out.dtype == dtype and out.stride() == want.stride()
                    torch.testing.assert_close(out, want.to(dtype), **tolerance)
                    if device == "cuda":
                        eager_out = eager(x, r)
                        torch.testing.assert_close(out, eager_out, **rounding)
                    for got, expected in zip(grads, want_grads, strict=True):
                        assert got.dtype == dtype
                        # Autodiff's formulas round each step to 16 bits, as they do
                        # without the fuser: a share of each gradient's largest value.
                        scale = {torch.float16: 2e-2, torch.bfloat16: 1e-1}[dtype]
                        atol = scale * expected.abs().max().item()
                        torch.testing.assert_close(got, expected.to(dtype), rtol=0, atol=atol)
                    states = zip(
                        scripted.state_dict().items(),
                        exact.state_dict().items(),
                        eager.state_dict().items(),
                        strict=True,
                    )
                    for (name, a), (_, e), (_, e16) in states:
                        tracked = name.endswith("tracked")
                        assert a.dtype == (torch.int64 if tracked else dtype), name
                        torch.testing.assert_close(a, e.to(a.dtype), msg=name, **tolerance)
                        if device == "cuda":
                            torch.testing.assert_close(a, e16, msg=name, **rounding)
        graphs = fuser._C._take_captured_graphs()
    finally:
        fuser._C._set_report_capture(False)
    kinds = set().union(*(kinds_of(g) for g in graphs))
    assert {BATCH_STATS_FOR_BACKWARD, "group:" + WITH_STATS, "group:aten::silu"} <= kinds


def grads_of(fn, x: torch.Tensor, r: torch.Tensor, params: list[torch.Tensor], weights):
    """fn's output and the gradients of (out * weights).sum()."""
    out = fn(x, r)
    return out, torch.autograd.grad((out * weights).sum(), [x, r, *params])


def check_step(scripted, model, x: torch.Tensor, r: torch.Tensor, weights: torch.Tensor) -> None:
    """One training step of each (leaves of their own): outputs, every gradient and the
    state tensors (running statistics, num_batches_tracked) equal."""
    ours = [t.clone().requires_grad_() for t in (x, r)]
    theirs = [t.clone().requires_grad_() for t in (x, r)]
    out, grads = grads_of(scripted, *ours, list(scripted.parameters()), weights)
    want, want_grads = grads_of(model, *theirs, list(model.parameters()), weights)
    torch.testing.assert_close(out, want, **TOLERANCE[torch.float32])
    for got, expected in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    assert_same_state(scripted, model)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("kind", ["bn2d", "bn1d_3d", "no_affine"])
def test_training_step_gradients_match_eager(device: str, kind: str) -> None:
    """With gradients: autodiff's _batch_norm_impl_index becomes the row group, the
    statistics op (which also gives the backward its saved mean and inverse standard
    deviation) and the normalization fused with the add and ReLU; the backward is
    ATen's native one. Outputs, every gradient and the running statistics match eager
    over several steps, and again in eval mode."""
    model = block(BN_MODULES[kind](), device).train()
    scripted = torch.jit.script(copy.deepcopy(model))
    shape = shape_of(kind)
    g = torch.Generator().manual_seed(5)
    weights = torch.randn(shape, generator=g).to(device)
    fuser._C._set_report_capture(True)  # the pass's graphs, autodiff's forward included
    with fuser.enabled(True), torch.autograd.set_multithreading_enabled(False):
        for mode in ["train", "eval"]:
            model.train(mode == "train")
            scripted.train(mode == "train")
            for call in range(4):
                x = inputs(shape, torch.float32, device, call)
                check_step(scripted, model, x, inputs(shape, torch.float32, device, 7), weights)
    graphs = fuser._C._take_captured_graphs()
    fuser._C._set_report_capture(False)
    kinds = set().union(*(kinds_of(g) for g in graphs))
    assert {BATCH_STATS_FOR_BACKWARD, "group:" + WITH_STATS, "group:aten::relu"} <= kinds


@pytest.mark.parametrize("device", devices())
def test_plan_profiled_without_gradients_then_run_with_them(device: str) -> None:
    """A plan optimized under no_grad whose guards fail once gradients are on runs the
    fallbacks: the batch statistics are differentiable there (ATen ops), so the input's
    gradient sees them as eager's does."""
    model = block(torch.nn.BatchNorm2d(6), device).train()
    scripted = torch.jit.script(copy.deepcopy(model))
    shape = shape_of("bn2d")
    weights = torch.randn(shape, device=device)
    with fuser.enabled(True), torch.autograd.set_multithreading_enabled(False):
        with torch.no_grad():
            for call in range(3):
                x = inputs(shape, torch.float32, device, call)
                r = inputs(shape, torch.float32, device, 9)
                scripted(x, r), model(x, r)
        x, r = inputs(shape, torch.float32, device, 3), inputs(shape, torch.float32, device, 4)
        check_step(scripted, model, x, r, weights)


LONE = """
def f(x, w, b, mean, var):
    return torch.batch_norm(x, w, b, mean, var, True, 0.1, 1e-5, True)
"""
CHANNELS_LAST = FUNCTIONAL
NO_RUNNING = """
def f(x, w, b):
    return torch.batch_norm(x, w, b, None, None, True, 0.1, 1e-5, True).relu()
"""


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("case", ["lone", "channels_last", "no_running"])
def test_left_to_aten(device: str, case: str) -> None:
    """Nothing fusible reads it; a channels-last input (its rows are strided); no
    running statistics: ATen's batch_norm stays, with eager's results."""
    x = inputs((4, 6, 5, 5), torch.float32, device, 0)
    w, b, mean, var = affine(6, torch.float32, device)
    text = {"lone": LONE, "channels_last": CHANNELS_LAST, "no_running": NO_RUNNING}[case]
    if case == "channels_last":
        x = x.to(memory_format=torch.channels_last)
    args = [x, w, b] if case == "no_running" else [x, w, b, mean, var]
    ours = [a.clone() for a in args]
    fn = script_from_source(text)
    with fuser.enabled(True):
        for _ in range(3):
            got = fn(*ours)
            want = eager_from_source(text)(*args)
            torch.testing.assert_close(got, want, **TOLERANCE[torch.float32])
            assert got.stride() == want.stride()
        for a, b_ in zip(ours, args, strict=True):
            torch.testing.assert_close(a, b_)
    kinds = kinds_of(fn.graph_for(*ours))
    assert "aten::batch_norm" in kinds and BATCH_STATS not in kinds


@pytest.mark.parametrize("device", devices())
def test_zero_size_and_single_value_batches(device: str) -> None:
    """Between ordinary calls: an empty batch (eager normalizes nothing and leaves the
    running statistics be) and one value per channel (eager's unbiased variance divides
    by zero: NaN running variance, as ours)."""
    fn = script_from_source(FUNCTIONAL)
    ref = eager_from_source(FUNCTIONAL)
    w, b, mean, var = affine(3, torch.float32, device)
    ours_mean, ours_var = mean.clone(), var.clone()
    shapes = [(4, 3, 5, 5)] * 3 + [(0, 3, 5, 5), (4, 3, 0, 5), (4, 3, 5, 5), (1, 3, 1, 1)]
    with fuser.enabled(True):
        for call, shape in enumerate(shapes):
            x = inputs(shape, torch.float32, device, seed=call) if 0 not in shape else None
            x = torch.empty(shape, device=device) if x is None else x
            got = fn(x, w, b, ours_mean, ours_var)
            want = ref(x, w, b, mean, var)
            assert got.shape == want.shape and got.stride() == want.stride()
            torch.testing.assert_close(got, want, **TOLERANCE[torch.float32], equal_nan=True)
            torch.testing.assert_close(ours_mean, mean, equal_nan=True)
            torch.testing.assert_close(ours_var, var, equal_nan=True)
    assert fuser.stats()["kernel_launches"] > 0


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "channels_last"])
def test_normalization_op_called_directly(device: str, layout: str) -> None:
    """fuser::batch_norm_with_stats as the interpreter runs it (fallbacks): eager's
    inference batch_norm's values and strides, and gradients through the statistics too
    (which eager's op refuses), as the formula in ATen ops gives them."""
    x = inputs((4, 3, 5, 6), torch.float32, device, 0)
    if layout == "transposed":
        x = x.transpose(2, 3)
    elif layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    w, b, mean, var = affine(3, torch.float32, device)
    got = torch.ops.fuser.batch_norm_with_stats(x, w, b, mean, var, False, 0.1, 1e-5, True)
    want = torch.batch_norm(x, w, b, mean, var, False, 0.1, 1e-5, True)
    torch.testing.assert_close(got, want, **TOLERANCE[torch.float32])
    assert got.stride() == want.stride()

    leaves = [t.clone().requires_grad_() for t in (x, mean, var)]
    out = torch.ops.fuser.batch_norm_with_stats(
        leaves[0], w, b, leaves[1], leaves[2], False, 0.1, 1e-5, True
    )
    c = [1, 3, 1, 1]
    ref = [t.clone().requires_grad_() for t in (x, mean, var)]
    formula = (ref[0] - ref[1].view(c)) * (ref[2].view(c) + 1e-5).rsqrt() * w.view(c) + b.view(c)
    g = torch.randn(out.shape, device=device)
    ours = torch.autograd.grad((out * g).sum(), leaves)
    theirs = torch.autograd.grad((formula * g).sum(), ref)
    for a, e in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="training False"):
        torch.ops.fuser.batch_norm_with_stats(x, w, b, mean, var, True, 0.1, 1e-5, True)
