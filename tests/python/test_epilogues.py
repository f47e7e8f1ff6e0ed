"""Bias epilogues: a convolution's or linear layer's bias joins the group after it, in
frozen modules (the bias a constant) and scripted ones; values, dtypes and strides equal
eager's."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import fuser
from helpers import all_nodes, devices, run_optimized


class ConvBnRelu(nn.Module):
    def __init__(self, dims: int) -> None:
        super().__init__()
        conv = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[dims]
        norm = {1: nn.BatchNorm1d, 2: nn.BatchNorm2d, 3: nn.BatchNorm3d}[dims]
        self.conv = conv(3, 8, 3, padding=1, bias=False)
        self.bn = norm(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x))) * 0.5


class LinearGelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.fc(x)) + 1.0


class Residual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x) + x)


def prepared(module: nn.Module, dtype: torch.dtype, device: str) -> nn.Module:
    torch.manual_seed(0)
    for p in module.parameters():
        p.data.normal_(0, 0.3)
    for b in module.buffers():
        if b.is_floating_point():
            b.data.uniform_(0.5, 1.5)
    return module.eval().to(device=device, dtype=dtype)


def group_kinds(graph: torch._C.Graph) -> list[list[str]]:
    return [
        [n.kind() for n in g.g("Subgraph").nodes() if n.kind() != "prim::Constant"]
        for g in all_nodes(graph)
        if g.kind() == "fuser::FusionGroup"
    ]


def check(module: nn.Module, x: torch.Tensor, frozen: bool, tol: float) -> list[list[str]]:
    fuser.enable()
    scripted = torch.jit.script(module)
    if frozen:
        scripted = torch.jit.freeze(scripted)
    with torch.no_grad():
        out = run_optimized(scripted, x)
        expected = module(x)
    assert out.dtype == expected.dtype and out.shape == expected.shape
    assert out.stride() == expected.stride()
    torch.testing.assert_close(out, expected, rtol=tol, atol=tol)
    return group_kinds(torch.jit.last_executed_optimized_graph())


def tolerance(dtype: torch.dtype) -> float:
    return {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 5e-2}[dtype]


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize("frozen", [True, False])
def test_conv_bias_joins_the_activation(device: str, dims: int, frozen: bool) -> None:
    module = prepared(ConvBnRelu(dims), torch.float32, device)
    x = torch.randn(2, 3, *([6] * dims), device=device)
    groups = check(module, x, frozen, 1e-4)
    if frozen:  # freezing folds the norm into a convolution bias
        assert ["aten::add", "aten::relu", "aten::mul"] in groups


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_linear_bias_joins_gelu(device: str, dtype: torch.dtype) -> None:
    if device == "cpu" and dtype == torch.float16:
        pytest.skip("half-precision matmul on CPU is eager-only territory here")
    module = prepared(LinearGelu(), dtype, device)
    x = torch.randn(4, 5, 16, device=device, dtype=dtype)
    groups = check(module, x, True, tolerance(dtype))
    if dtype == torch.float32:
        assert ["aten::add", "aten::gelu", "aten::add"] in groups
    else:  # eager adds the bias before rounding: a split would round twice
        assert ["aten::gelu", "aten::add"] in groups


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_conv_bias_splits_only_where_eager_adds_it_after(
    device: str, dtype: torch.dtype
) -> None:
    if device == "cpu" and dtype == torch.float16:
        pytest.skip("half-precision convolution on CPU is eager-only territory here")
    module = prepared(Residual(), dtype, device)
    x = torch.randn(2, 8, 7, 7, device=device, dtype=dtype)
    fuser.enable()
    scripted = torch.jit.freeze(torch.jit.script(module))
    with torch.no_grad():
        out = run_optimized(scripted, x)
        expected = module(x)
    # Bit for bit: where the bias is split, eager adds it in a kernel of its own too.
    assert torch.equal(out, expected)
    groups = group_kinds(torch.jit.last_executed_optimized_graph())
    split = device == "cuda"
    assert (["aten::add", "aten::add", "aten::relu"] in groups) == split


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("channels_last", [False, True])
def test_residual_add_takes_the_bias(device: str, channels_last: bool) -> None:
    module = prepared(Residual(), torch.float32, device)
    x = torch.randn(2, 8, 7, 7, device=device)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    groups = check(module, x, True, 1e-4)
    assert ["aten::add", "aten::add", "aten::relu"] in groups


class PermutedLinear(nn.Module):
    """ConvNeXt's block ends: its second linear over NHWC rows, permuted back to NCHW,
    then a layer scale and the residual add; or a linear over (B, T, C) read as (B, C, T)."""

    def __init__(self, dims: tuple[int, ...]) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 8)
        self.gamma = nn.Parameter(torch.rand(8, *([1] * (len(dims) - 2))))
        self.dims = dims

    def forward(self, x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return r + self.gamma * self.fc(x).permute(self.dims)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("dims", [(0, 3, 1, 2), (0, 2, 1)], ids=str)
@pytest.mark.parametrize("frozen", [True, False])
def test_a_linear_bias_joins_the_group_after_a_permute(
    device: str, dtype: torch.dtype, dims: tuple[int, ...], frozen: bool
) -> None:
    """The bias goes after the permute, along the dim the linear's last dim lands on (dim
    1 here), and joins the layer scale's group; in 16 bits eager adds it before rounding,
    so it stays in the product. (Scripted, not frozen, the bias is an attribute whose
    type the profile does not complete: it stays, as test_linear_bias_joins_gelu's.)"""
    module = prepared(PermutedLinear(dims), dtype, device)
    lead = (2, 5, 3) if len(dims) == 4 else (2, 7)
    x = torch.randn(*lead, 16, device=device, dtype=dtype)
    r = torch.randn(*lead, 8, device=device, dtype=dtype).permute(dims).contiguous()
    fuser.enable()
    scripted = torch.jit.script(module)
    if frozen:
        scripted = torch.jit.freeze(scripted)
    with torch.no_grad():
        out = run_optimized(scripted, x, r)
        expected = module(x, r)
    assert out.dtype == expected.dtype and out.stride() == expected.stride()
    torch.testing.assert_close(out, expected, rtol=tolerance(dtype), atol=tolerance(dtype))
    graph = torch.jit.last_executed_optimized_graph()
    groups = group_kinds(graph)
    linears = [n for n in all_nodes(graph) if n.kind() == "aten::linear"]
    assert len(linears) == 1
    split = dtype == torch.float32 and frozen
    assert (linears[0].inputsAt(2).type().kind() == "NoneType") == split
    assert any(g.count("aten::add") == (2 if split else 1) and "aten::mul" in g for g in groups)


class PermutedConv(nn.Module):
    def __init__(self, dims: tuple[int, ...]) -> None:
        super().__init__()
        self.conv = (nn.Conv1d if len(dims) == 2 else nn.Conv2d)(4, 6, 1)
        self.dims = dims

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x).permute(self.dims)) * 2.0


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize(
    "dims, shape",
    [((1, 0), (4, 5)), ((1, 2, 0), (4, 5, 3)), ((0, 2, 3, 1), (2, 4, 5, 3))],
    ids=str,
)
def test_a_convolution_bias_after_a_permute_lies_along_its_channels(
    device: str, dims: tuple[int, ...], shape: tuple[int, ...]
) -> None:
    """Unbatched convolutions' channels are their dim 0 (the bias once went along dim 1
    there: wrong values, or a size error)."""
    module = prepared(PermutedConv(dims), torch.float32, device)
    groups = check(module, torch.randn(*shape, device=device), True, 1e-4)
    assert ["aten::add", "aten::relu", "aten::mul"] in groups


def test_bias_stays_when_nothing_fusible_reads_it() -> None:
    class ConvPool(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.max_pool2d(self.conv(x), 2)

    module = prepared(ConvPool(), torch.float32, "cpu")
    check(module, torch.randn(1, 3, 8, 8), True, 1e-4)
    graph = torch.jit.last_executed_optimized_graph()
    convs = [n for n in all_nodes(graph) if n.kind() == "aten::conv2d"]
    assert len(convs) == 1
    assert convs[0].inputsAt(2).type().kind() != "NoneType"


class Conv1DGelu(nn.Module):
    """transformers' Conv1D (GPT-2's projections: addmm of the flattened rows, viewed
    back) and GPT-2's tanh GELU, or a split into heads after it (`heads`)."""

    def __init__(self, heads: bool = False) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(16, 32))
        self.bias = nn.Parameter(torch.randn(32))
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        if self.heads:  # the view splits the dim the bias spans
            h = h.view(x.size(0), x.size(1), 4, 8)
        else:
            h = h.view(x.size(0), x.size(1), 32)
        return 0.5 * h * (1.0 + torch.tanh(0.7978845608 * (h + 0.044715 * torch.pow(h, 3.0))))


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_a_bias_add_moves_past_the_view_after_it(device: str, dtype: torch.dtype) -> None:
    """TorchScript decomposes addmm into mm + add(bias); the add moves past Conv1D's view
    and joins the GELU (passes/adds_past_views.cpp)."""
    if device == "cpu" and dtype == torch.float16:
        pytest.skip("half-precision matmul on CPU is eager-only territory here")
    module = prepared(Conv1DGelu(), dtype, device)
    x = torch.randn(4, 5, 16, device=device, dtype=dtype)
    groups = check(module, x, True, tolerance(dtype))
    assert any(kinds[0] == "aten::add" and "aten::tanh" in kinds for kinds in groups), groups
    adds_outside = [
        n.kind()
        for n in torch.jit.last_executed_optimized_graph().nodes()
        if n.kind() == "aten::add"
    ]
    assert not adds_outside


@pytest.mark.parametrize("device", devices())
def test_a_bias_add_stays_before_a_view_that_splits_its_dim(device: str) -> None:
    module = prepared(Conv1DGelu(heads=True), torch.float32, device)
    x = torch.randn(4, 5, 16, device=device)
    groups = check(module, x, True, tolerance(torch.float32))
    assert not any(kinds[0] == "aten::add" and "aten::tanh" in kinds for kinds in groups)


class QkvProjection(nn.Module):
    """GPT-2's c_attn: one Conv1D for query, key and value, viewed and split, so nothing
    fusible reads the bias add TorchScript decomposes addmm into."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(16, 48))
        self.bias = nn.Parameter(torch.randn(48))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        q, k, v = h.view(x.size(0), x.size(1), 48).split(16, dim=2)
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_a_bias_add_nothing_fuses_goes_back_into_the_product(
    device: str, dtype: torch.dtype
) -> None:
    """On CUDA, mm + add(bias) that no group took is one addmm again, its bias added in
    cuBLAS's epilogue as in eager (passes/lone_bias_adds.cpp); on CPU it stays."""
    if device == "cpu" and dtype == torch.float16:
        pytest.skip("half-precision matmul on CPU is eager-only territory here")
    module = prepared(QkvProjection(), dtype, device)
    x = torch.randn(4, 5, 16, device=device, dtype=dtype)
    fuser.enable()
    scripted = torch.jit.freeze(torch.jit.script(module))
    with torch.no_grad():
        got = run_optimized(scripted, x)
        want = module(x)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape and g.stride() == w.stride()
        torch.testing.assert_close(g, w, rtol=tolerance(dtype), atol=tolerance(dtype))
    kinds = [n.kind() for n in all_nodes(torch.jit.last_executed_optimized_graph())]
    if device == "cuda":
        assert "aten::addmm" in kinds and "aten::add" not in kinds and "aten::mm" not in kinds
    else:
        assert "aten::mm" in kinds and "aten::add" in kinds


class SpatialGate(nn.Module):
    """gMLP's gating unit: the linear layer's halves (its bias split off and chunked
    with them) feed two groups, a layer_norm's and the gate's product."""

    def __init__(self, tokens: int, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, 2 * width)
        self.norm = nn.LayerNorm(width)
        self.proj = nn.Linear(tokens, tokens)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u, v = F.gelu(self.fc(x)).chunk(2, dim=-1)
        v = self.proj(self.norm(v).transpose(-1, -2))
        return u * v.transpose(-1, -2)


@pytest.mark.parametrize("device", devices())
def test_chunked_bias_halves_feeding_two_groups_run_compiled(device: str) -> None:
    module = prepared(SpatialGate(12, 16), torch.float32, device)
    x = torch.randn(2, 12, 16, device=device)
    fuser.reset_stats()
    check(module, x, True, 1e-4)
    stats = fuser.stats()
    assert stats["groups_formed"] >= 2
    # The bias halves are stride-0 views; groups planned for copies ran interpreted.
    assert stats["interpreted_runs"] == 0
