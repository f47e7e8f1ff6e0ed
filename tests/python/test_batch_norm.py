"""Inference batch_norm (ops/batch_norm.h) is elementwise over its input and joins the
group around it: its [C] statistics are read along dim 1 (runtime/kernel_graph.h,
`channels_of`). Values, dtypes, shapes and strides equal eager's for every floating
dtype, rank 2 to 5, channels-last and strided inputs, with and without weight and
bias; calls whose sizes eager refuses raise eager's error; operands computed in the
group are left to ATen. Batch statistics (training): test_batch_norm_training.py."""

from __future__ import annotations

import copy

import pytest
import torch

import fuser
from helpers import FUSION_GROUP, all_nodes, devices, eager_from_source, script_from_source

BN_RELU = """
def f(x, w, b, mean, var):
    return torch.batch_norm(x, w, b, mean, var, False, 0.1, 1e-5, True).relu()
"""

# x's dtype -> the statistics' dtypes eager accepts beside it.
STAT_DTYPES = {
    torch.float32: [torch.float32],
    torch.float64: [torch.float64],
    torch.float16: [torch.float16, torch.float32],
    torch.bfloat16: [torch.bfloat16, torch.float32],
}
CASES = [(x, s) for x, stats in STAT_DTYPES.items() for s in stats]


def tolerance(dtype: torch.dtype) -> dict[str, float]:
    """Both compute in float for 16-bit inputs and round once; the formula's order may
    differ from eager's CPU one (x * alpha + beta) by a rounding step."""
    if dtype == torch.float16:
        return {"rtol": 2e-3, "atol": 2e-3}
    if dtype == torch.bfloat16:
        return {"rtol": 1.6e-2, "atol": 1.6e-2}
    if dtype == torch.float32:
        return {"rtol": 1e-5, "atol": 1e-5}
    return {}


def statistics(c: int, dtype: torch.dtype, device: str) -> list[torch.Tensor]:
    """weight, bias, running mean, running variance (positive)."""
    w, b, mean = (torch.randn(c, device=device) for _ in range(3))
    var = torch.rand(c, device=device) + 0.5
    return [t.to(dtype) for t in (w, b, mean, var)]


def group_kinds(fn: object, *args: object) -> list[set[str]]:
    graph = fn.graph_for(*args)  # type: ignore[attr-defined]
    return [
        {n.kind() for n in node.g("Subgraph").nodes()}
        for node in all_nodes(graph)
        if node.kind() == FUSION_GROUP
    ]


def check(text: str, *args: torch.Tensor, dtype: torch.dtype, calls: int = 3) -> object:
    """Runs `text` scripted with the fuser and eagerly; every output equal in shape,
    dtype, strides and values; returns the scripted function. 16-bit values are held to
    a float64 reference instead: eager's CPU kernel folds the statistics into a scale
    and shift in the statistics' dtype, whose rounding a cancelling x * scale + shift
    magnifies (0.0029 away at an output of 0.078 in float16); the kernel, computing in
    float, must be at least as close, element by element, up to a rounding step."""
    fn = script_from_source(text)
    eager = eager_from_source(text)
    with fuser.enabled(True):
        for _ in range(calls):
            got = fn(*args)
    want = eager(*args)
    got, want = (v if isinstance(v, tuple) else (v,) for v in (got, want))
    refs: tuple[torch.Tensor, ...] = ()
    if dtype in (torch.float16, torch.bfloat16):
        ref = eager(*(a.double() if a.is_floating_point() else a for a in args))
        refs = ref if isinstance(ref, tuple) else (ref,)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert (g.shape, g.dtype, g.stride()) == (w.shape, w.dtype, w.stride()), text
        if not refs:
            torch.testing.assert_close(g, w, **tolerance(dtype))
            continue
        ref = refs[i]
        step = torch.finfo(dtype).eps * ref.abs() + 1e-6
        fused_error, eager_error = (g.double() - ref).abs(), (w.double() - ref).abs()
        assert bool((fused_error <= eager_error + step).all()), (
            text,
            (fused_error - eager_error - step).max().item(),
        )
    return fn


def layouts(x: torch.Tensor) -> dict[str, torch.Tensor]:
    out = {"contiguous": x, "transposed": x.transpose(0, -1).contiguous().transpose(0, -1)}
    if x.dim() == 4:
        out["channels_last"] = x.contiguous(memory_format=torch.channels_last)
    if x.dim() == 5:
        out["channels_last_3d"] = x.contiguous(memory_format=torch.channels_last_3d)
    out["sliced"] = torch.cat([x, x], dim=-1)[..., ::2]
    return out


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize(("dtype", "stat_dtype"), CASES, ids=str)
@pytest.mark.parametrize("shape", [(6, 5), (3, 5, 7), (2, 5, 6, 9), (2, 5, 3, 4, 3)], ids=str)
def test_batch_norm_relu_is_one_group(
    shape: tuple[int, ...], dtype: torch.dtype, stat_dtype: torch.dtype, device: str
) -> None:
    stats = statistics(shape[1], stat_dtype, device)
    for name, x in layouts(torch.randn(shape, device=device).to(dtype)).items():
        fuser.reset_stats()
        fn = check(BN_RELU, x, *stats, dtype=dtype)
        s = fuser.stats()
        assert s["kernel_launches"] >= 2 and s["interpreted_runs"] == 0, (name, s)
        assert s["cuda_cross_compile_failures"] == 0, s
        assert group_kinds(fn, x, *stats) == [{"aten::batch_norm", "aten::relu", "prim::Constant"}]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="eager's CUDA backend choice")
def test_cuda_layout_follows_eagers_backend_choice() -> None:
    """On CUDA, eager's batch_norm allocates in the suggested format where it takes cuDNN
    and like its input in ATen's own kernel: a BatchNorm1d input made by a transpose
    (dense, not contiguous) tells them apart, and cuDNN switched off between calls of
    the same function changes eager's answer, which the group follows."""
    x = torch.randn(4, 9, 5, device="cuda").transpose(1, 2)  # [N, C, L], strides (45, 1, 5)
    stats = statistics(5, torch.float32, "cuda")
    fn, eager = script_from_source(BN_RELU), eager_from_source(BN_RELU)
    strides = {}
    fuser.reset_stats()
    with fuser.enabled(True):
        for cudnn in (True, False, True):
            with torch.backends.cudnn.flags(enabled=cudnn):
                for _ in range(3):
                    got = fn(x, *stats)
                want = eager(x, *stats)
            assert got.stride() == want.stride(), (cudnn, got.stride(), want.stride())
            torch.testing.assert_close(got, want, **tolerance(torch.float32))
            strides[cudnn] = want.stride()
    assert strides[True] != strides[False], strides  # the case tells the backends apart
    assert fuser.stats()["kernel_launches"] >= 6, fuser.stats()


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("affine", ["none", "weight", "bias"])
def test_without_weight_or_bias(device: str, affine: str) -> None:
    text = BN_RELU.replace(
        "(x, w, b, mean, var, ",
        {
            "none": "(x, None, None, mean, var, ",
            "weight": "(x, w, None, mean, var, ",
            "bias": "(x, None, b, mean, var, ",
        }[affine],
    )
    x = torch.randn(4, 3, 5, 5, device=device)
    check(text, x, *statistics(3, torch.float32, device), dtype=torch.float32)
    assert fuser.stats()["kernel_launches"] >= 2


@pytest.mark.parametrize("device", devices())
def test_with_a_residual_and_a_second_output(device: str) -> None:
    """A residual add after the batch_norm joins too, and the normalized value is
    returned beside the sum: one kernel writes both."""
    text = """
def f(x, r, w, b, mean, var):
    y = torch.batch_norm(x, w, b, mean, var, False, 0.1, 1e-3, True)
    return y, (y + r).relu()
"""
    x, r = torch.randn(2, 8, 5, 5, device=device), torch.randn(2, 8, 5, 5, device=device)
    fn = check(text, x, r, *statistics(8, torch.float32, device), dtype=torch.float32)
    assert fuser.stats()["kernel_launches"] >= 2
    [kinds] = group_kinds(fn, x, r, *statistics(8, torch.float32, device))
    assert {"aten::batch_norm", "aten::add", "aten::relu"} <= kinds


@pytest.mark.parametrize("device", devices())
def test_one_statistic_also_read_along_the_last_dim(device: str) -> None:
    """`mean` is read per channel by the batch_norm and, broadcast along the last dim, by
    the add: the kernel reads it both ways (C equals the last dim here, so reading it
    the wrong way would give other values)."""
    text = """
def f(x, w, b, mean, var):
    return torch.batch_norm(x, w, b, mean, var, False, 0.1, 1e-5, True) + mean
"""
    x = torch.randn(3, 4, 4, device=device)
    check(text, x, *statistics(4, torch.float32, device), dtype=torch.float32)
    assert fuser.stats()["kernel_launches"] >= 2


@pytest.mark.parametrize("device", devices())
def test_new_ranks_and_sizes_stay_correct(device: str) -> None:
    """The guard fixes ranks, not sizes: a new batch and spatial size reuse the kernel;
    a new rank runs the fallback, which is eager's batch_norm (never the kernel's
    per-channel view of another rank)."""
    fn = script_from_source(BN_RELU)
    eager = eager_from_source(BN_RELU)
    stats = statistics(4, torch.float32, device)
    with fuser.enabled(True):
        for shape in [(2, 4, 3, 3)] * 3 + [(5, 4, 7, 2), (1, 4, 1, 1), (3, 4, 4), (3, 4)]:
            x = torch.randn(shape, device=device)
            got, want = fn(x, *stats), eager(x, *stats)
            assert got.shape == want.shape and got.stride() == want.stride()
            torch.testing.assert_close(got, want)
    assert fuser.stats()["kernel_launches"] >= 4


@pytest.mark.parametrize("device", devices())
def test_statistics_of_another_size_raise_as_eager(device: str) -> None:
    """One-element statistics beside 4 channels would broadcast in a kernel; eager
    refuses them, and so does the fused function."""
    fn = script_from_source(BN_RELU)
    with fuser.enabled(True):
        for _ in range(3):
            fn(torch.randn(2, 4, 3, device=device), *statistics(4, torch.float32, device))
        launches = fuser.stats()["kernel_launches"]
        assert launches >= 2
        with pytest.raises(RuntimeError, match="running_mean should contain 4 elements not 1"):
            fn(torch.randn(2, 4, 3, device=device), *statistics(1, torch.float32, device))
        assert fuser.stats()["kernel_launches"] == launches


@pytest.mark.parametrize("device", devices())
def test_zero_size_and_size_one_dims(device: str) -> None:
    stats = statistics(3, torch.float32, device)
    for shape in [(0, 3, 4), (2, 3, 0), (1, 3, 1), (5, 3, 1, 1)]:
        check(BN_RELU, torch.randn(shape, device=device), *stats, dtype=torch.float32)


def test_computed_operands_stay_with_aten() -> None:
    """An operand the group would compute could not be checked against x's channels,
    nor could x. (Batch statistics: test_batch_norm_training.py.)"""
    computed = """
def f(x, w, b, mean, var):
    return torch.batch_norm(x * 2.0, w, b, mean + 1.0, var, False, 0.1, 1e-5, True).relu()
"""
    x = torch.randn(4, 3, 5, 5)
    stats = statistics(3, torch.float32, "cpu")
    fn = check(computed, x, *[s.clone() for s in stats], dtype=torch.float32)
    [bn_group] = [k for k in group_kinds(fn, x, *stats) if "aten::batch_norm" in k]
    assert "aten::mul" not in bn_group and "aten::add" not in bn_group


def test_convolution_bias_stays_before_a_batch_norm() -> None:
    text = """
def f(x, k, kb, w, b, mean, var):
    y = torch.conv2d(x, k, kb)
    return torch.batch_norm(y, w, b, mean, var, False, 0.1, 1e-5, True).relu()
"""
    x, k, kb = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3), torch.randn(4)
    stats = statistics(4, torch.float32, "cpu")
    fn = check(text, x, k, kb, *stats, dtype=torch.float32)
    graph = fn.graph_for(x, k, kb, *stats)
    [conv] = [n for n in all_nodes(graph) if n.kind() == "aten::conv2d"]
    assert conv.inputsAt(2).type().kind() == "TensorType"  # the bias stays in the conv
    assert group_kinds(fn, x, k, kb, *stats) == [
        {"aten::batch_norm", "aten::relu", "prim::Constant"}
    ]


def bn_relu_module() -> torch.nn.Module:
    model = torch.nn.Sequential(torch.nn.BatchNorm2d(6), torch.nn.ReLU()).eval()
    with torch.no_grad():
        model[0].running_mean.uniform_(-1, 1)
        model[0].running_var.uniform_(0.5, 2)
        model[0].weight.uniform_(-1, 1)
        model[0].bias.uniform_(-1, 1)
    return model


def test_module_in_eval_mode_after_freezing() -> None:
    """Frozen in eval mode, `training` is a constant False."""
    model = bn_relu_module()
    frozen = torch.jit.freeze(torch.jit.script(model))
    x = torch.randn(2, 6, 7, 7)
    with torch.no_grad(), fuser.enabled(True):
        for _ in range(3):
            got = frozen(x)
    torch.testing.assert_close(got, model(x))
    assert fuser.stats()["kernel_launches"] >= 2


def test_unfrozen_module_fuses_in_eval_and_in_training() -> None:
    """An unfrozen scripted module reads `self.training`, which branches between the
    running statistics and the batch's (passes/batch_norm_training.cpp): in eval mode
    the group normalizes with the running ones, after .train() with the batch's while
    the running ones are updated as eager updates them, and back in eval the first
    kernel runs again; no guard fails on the way."""
    model = bn_relu_module()
    scripted = torch.jit.script(copy.deepcopy(model))
    x = torch.randn(2, 6, 7, 7)
    with torch.no_grad(), fuser.enabled(True):
        for _ in range(3):
            torch.testing.assert_close(scripted(x), model(x))
        launches = fuser.stats()["kernel_launches"]
        assert launches >= 2 and fuser.stats()["guard_failures"] == 0
        model.train()
        scripted.train()
        for _ in range(3):
            torch.testing.assert_close(scripted(x), model(x))
        torch.testing.assert_close(scripted[0].running_mean, model[0].running_mean)
        torch.testing.assert_close(scripted[0].running_var, model[0].running_var)
        training_launches = fuser.stats()["kernel_launches"]
        assert training_launches >= launches + 6  # statistics and normalization, per call
        assert fuser.stats()["guard_failures"] == 0
        model.eval()
        scripted.eval()
        for _ in range(3):
            torch.testing.assert_close(scripted(x), model(x))
    assert fuser.stats()["kernel_launches"] == training_launches + 3
