"""Frozen convolution networks run channels-last (passes/channels_last.cpp): the
convolutions' weights are channels-last copies, and every value leaving the
channels-last region is restored to the layout eager gives it. On CPU the pass runs
only where a test asks (FUSER_CHANNELS_LAST=all), so that CI checks it against eager;
on CUDA it is the default."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torch.nn.functional as F

import fuser
from helpers import all_nodes, devices

RESTORE = "fuser::restore_layout"


@pytest.fixture
def channels_last(fused) -> Iterator[None]:
    """The pass on for CPU graphs too, for graphs optimized inside the test. cuDNN's
    float32 convolutions without TF32, so that eager's algorithms and the channels-last
    ones differ in rounding order only (in TF32 they differ by about 1e-3)."""
    fuser._C._set_channels_last(True, True)
    tf32 = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        fuser._C._set_channels_last(True, False)
        torch.backends.cudnn.allow_tf32 = tf32


class Block(torch.nn.Module):
    """Residual blocks of 3x3 and 1x1 convolutions with BatchNorm and ReLU, a
    squeeze-excite scale, a max pool, two branches joined by cat, then the classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.reduce = torch.nn.Conv2d(8, 8, 1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.conv = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.squeeze = torch.nn.Conv2d(8, 4, 1)
        self.excite = torch.nn.Conv2d(4, 8, 1)
        self.left = torch.nn.Conv2d(8, 4, 3, padding=1)
        self.right = torch.nn.Conv2d(8, 4, 1)
        self.fc = torch.nn.Linear(8, 5)
        with torch.no_grad():  # statistics that are not the identity
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = F.relu(self.stem(x))
        y = F.relu(self.bn(self.reduce(y)) + y)
        s = F.adaptive_avg_pool2d(y, 1)
        y = self.conv(y) * torch.sigmoid(self.excite(F.relu(self.squeeze(s))))
        y = F.max_pool2d(y, 2)
        y = torch.cat([self.left(y), self.right(y)], 1)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1)), y


def frozen(module: torch.nn.Module, device: str) -> torch.jit.ScriptModule:
    return torch.jit.freeze(torch.jit.script(module.to(device).eval()))


def run_like_eager(module: torch.nn.Module, scripted, x: torch.Tensor) -> torch._C.Graph:
    """Calls until optimized; every output has eager's values and strides. The graph run."""
    with torch.no_grad():
        want = module(x)
        for _ in range(3):
            got = scripted(x)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
        assert g.stride() == w.stride()
    return torch.jit.last_executed_optimized_graph()


def constant_weights(graph: torch._C.Graph) -> list[torch.Tensor]:
    weights = []
    for node in graph.findAllNodes("aten::conv2d"):
        w = node.inputsAt(1).toIValue()
        if w is not None:
            weights.append(w)
    return weights


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("layout", [torch.contiguous_format, torch.channels_last])
def test_network_runs_channels_last_and_returns_eager_layouts(
    channels_last, device: str, layout: torch.memory_format
) -> None:
    torch.manual_seed(0)
    module = Block().to(device).eval()
    x = torch.randn(2, 3, 16, 16, device=device).contiguous(memory_format=layout)
    graph = run_like_eager(module, frozen(module, device), x)
    weights = constant_weights(graph)
    assert len(weights) == 7
    # Channels-last strides, the 1x1 weights' too (they suggest channels-last only so).
    for w in weights:
        assert w.stride() == torch.empty(w.shape, memory_format=torch.channels_last).stride()
    assert any(not w.is_contiguous() for w in weights)  # the 3x3 ones were copied
    # Two values leave the region: the pooled features (flatten) and the cat's result
    # (a graph output); the cat reads its branches channels-last.
    restores = graph.findAllNodes(RESTORE)
    assert len(restores) == 2
    cat = graph.findNode("aten::cat")
    assert all(v.node().kind() != RESTORE for v in cat.inputsAt(0).node().inputs())


@pytest.mark.parametrize("device", devices())
def test_one_scripted_network_follows_each_calls_input_layout(channels_last, device) -> None:
    # The layout eager gives the outputs follows each call's input, not the profiled one.
    torch.manual_seed(1)
    module = Block().to(device).eval()
    scripted = frozen(module, device)
    x = torch.randn(2, 3, 16, 16, device=device)
    run_like_eager(module, scripted, x)
    run_like_eager(module, scripted, x.contiguous(memory_format=torch.channels_last))
    run_like_eager(module, scripted, x)


class SqueezeExcite(torch.nn.Module):
    """timm's squeeze-excite blocks: the gate from a mean over H and W through two 1x1
    convolutions, its product with the features; the head pools by a mean too."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.dw = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.reduce = torch.nn.Conv2d(16, 4, 1)
        self.expand = torch.nn.Conv2d(4, 16, 1)
        self.project = torch.nn.Conv2d(16, 8, 1)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = F.silu(self.stem(x))
        y = F.silu(self.dw(y))
        gate = torch.sigmoid(self.expand(F.silu(self.reduce(y.mean((2, 3), keepdim=True)))))
        y = self.project(y * gate)
        return self.fc(y.mean((-1, -2))), y


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("layout", [torch.contiguous_format, torch.channels_last])
def test_squeeze_excite_means_read_channels_last_values_in_place(
    channels_last, device: str, layout: torch.memory_format
) -> None:
    """The means over H and W read the channels-last features as they are (ATen lays a
    mean's result out row-major whatever its input's layout), and the gate's product
    stays channels-last: nothing is restored but the graph's returned features. The
    features' groups keep the means outside (their rows lie apart in memory), so no
    group runs interpreted."""
    torch.manual_seed(2)
    module = SqueezeExcite().to(device).eval()
    x = torch.randn(2, 3, 16, 16, device=device).contiguous(memory_format=layout)
    graph = run_like_eager(module, frozen(module, device), x)
    assert fuser.stats()["interpreted_runs"] == 0, fuser.stats()
    assert len(constant_weights(graph)) == 5
    restores = graph.findAllNodes(RESTORE)
    assert len(restores) == 1, graph
    assert restores[0].output() in list(graph.outputs()) or any(
        restores[0].output() in list(n.inputs()) for n in graph.findAllNodes("prim::TupleConstruct")
    )
    for mean in graph.findAllNodes("aten::mean"):
        assert mean.inputsAt(0).node().kind() != RESTORE


class ThreeConvs(torch.nn.Module):
    """Three 3x3 convolutions a, b, c to 4 channels, a reading `in_channels`."""

    def __init__(self, in_channels: int) -> None:
        super().__init__()
        self.a = torch.nn.Conv2d(in_channels, 4, 3, padding=1)
        self.b = torch.nn.Conv2d(4, 4, 3, padding=1)
        self.c = torch.nn.Conv2d(4, 4, 3, padding=1)


class Outside(ThreeConvs):
    """A region value added to a full-size value from outside, and one read in a branch."""

    def __init__(self) -> None:
        super().__init__(4)

    def forward(self, x: torch.Tensor, flag: bool) -> torch.Tensor:
        y = self.b(F.relu(self.a(x)))
        z = y + x  # x is full size and outside the region
        if flag:
            z = z + self.c(y).transpose(2, 3)
        return z


@pytest.mark.parametrize("device", devices())
def test_readers_outside_the_region_read_eager_layouts(channels_last, device) -> None:
    torch.manual_seed(2)
    module = Outside().to(device).eval()
    scripted = frozen(module, device)
    x = torch.randn(2, 4, 8, 8, device=device)
    with torch.no_grad():
        for flag in (True, False):
            want = module(x, flag)
            for _ in range(3):
                got = scripted(x, flag)
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
            assert got.stride() == want.stride()
    graph = torch.jit.last_executed_optimized_graph()
    assert graph.findAllNodes(RESTORE)


class Shallow(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.b = torch.nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y = F.relu(self.a(x))
        z = self.b(y)
        return y, z, z * 2.0


def test_networks_whose_values_leave_at_full_size_stay_row_major(channels_last) -> None:
    # Two convolutions, three full-size values leaving: three copies would cost more
    # than the two convolutions' layout transforms save.
    module = Shallow().eval()
    graph = run_like_eager(module, frozen(module, "cpu"), torch.randn(1, 3, 8, 8))
    assert not graph.findAllNodes(RESTORE)
    assert all(w.is_contiguous() for w in constant_weights(graph))


class Narrow(torch.nn.Module):
    """Three convolutions of `channels` channels after an RGB stem, one value leaving."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, channels, 3, padding=1)
        self.a = torch.nn.Conv2d(channels, channels, 3, padding=1)
        self.b = torch.nn.Conv2d(channels, channels, 1)
        self.c = torch.nn.Conv2d(channels, channels, 3, padding=1, groups=channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.a(F.relu(self.stem(x))))
        return self.c(F.relu(self.b(y)))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("channels", [12, 16])
def test_16_bit_convolutions_of_padded_channel_counts_stay_row_major(
    channels_last, channels: int, dtype: torch.dtype
) -> None:
    # cuDNN pads 16-bit channels-last convolutions to multiples of 8 channels around each
    # call: 12 channels gain nothing in 16 bits (the RGB stem never does), 16 do; float32
    # convolutions gain at any count.
    torch.manual_seed(0)
    module = Narrow(channels).eval().to(dtype)
    x = torch.randn(2, 3, 8, 8, dtype=dtype)
    scripted = frozen(module, "cpu")
    with torch.no_grad():
        want = module(x)
        for _ in range(3):
            got = scripted(x)
    tolerance = 1e-2 if dtype == torch.bfloat16 else 1e-4
    torch.testing.assert_close(got, want, rtol=tolerance, atol=tolerance)
    assert got.stride() == want.stride()
    graph = torch.jit.last_executed_optimized_graph()
    converted = not all(w.is_contiguous() for w in constant_weights(graph))
    assert converted == (channels % 8 == 0 or dtype == torch.float32)
    assert bool(graph.findAllNodes(RESTORE)) == converted


def test_off_leaves_graphs_alone(fused) -> None:
    fuser._C._set_channels_last(False, False)
    try:
        module = Block().eval()
        graph = run_like_eager(module, frozen(module, "cpu"), torch.randn(1, 3, 8, 8))
    finally:
        fuser._C._set_channels_last(True, False)
    assert not graph.findAllNodes(RESTORE)
    assert all(w.is_contiguous() for w in constant_weights(graph))


def test_restore_layout_copies_only_across_orders() -> None:
    op = torch.ops.fuser.restore_layout
    rows = torch.randn(2, 3, 4, 5)
    cl = rows.contiguous(memory_format=torch.channels_last)
    # To row-major: a copy with row-major strides.
    out = op(cl, rows)
    assert out.stride() == rows.stride() and torch.equal(out, rows)
    # Already in the reference's order: the value itself.
    assert op(cl, cl).data_ptr() == cl.data_ptr() and op(cl, cl).stride() == cl.stride()
    # Size-1 planes: the same memory in either order, eager's strides as a view.
    pooled = torch.randn(2, 3, 1, 1).contiguous(memory_format=torch.channels_last)
    viewed = op(pooled, rows)
    assert viewed.data_ptr() == pooled.data_ptr()
    assert viewed.stride() == torch.empty(2, 3, 1, 1).stride()


class Contiguous(ThreeConvs):
    def __init__(self, more: int = 1) -> None:
        super().__init__(3)
        self.more = torch.nn.Sequential(*[torch.nn.Conv2d(4, 4, 1) for _ in range(more)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.a(x).to(torch.float32)  # to() preserving the layout: stays in the region
        z = self.b(y).contiguous()  # sets the layout: leaves it
        # c converts z back to channels-last: a second copy.
        return torch.flatten(F.adaptive_avg_pool2d(self.more(self.c(z)), 1), 1)


def test_ops_that_set_the_layout_leave_the_region(channels_last) -> None:
    module = Contiguous().eval()
    graph = run_like_eager(module, frozen(module, "cpu"), torch.randn(1, 3, 8, 8))
    a, b, _, _ = graph.findAllNodes("aten::conv2d")
    restored = [r.inputsAt(0).node() for r in graph.findAllNodes(RESTORE)]
    assert len(restored) == 2  # b's result (read by contiguous), and the pooled features
    assert any(node is b for node in restored)
    assert not any(node is a for node in restored)


def test_values_that_leave_and_come_back_count_as_copies(channels_last) -> None:
    # b's result leaves (contiguous) and c converts it back: two copies, which three
    # convolutions' transforms do not pay for, and four do.
    for more, converted in ((0, False), (1, True)):
        module = Contiguous(more).eval()
        graph = run_like_eager(module, frozen(module, "cpu"), torch.randn(1, 3, 8, 8))
        assert bool(graph.findAllNodes(RESTORE)) == converted
        assert all(w.is_contiguous() for w in constant_weights(graph)) != converted


def test_traced_networks_run_channels_last(channels_last) -> None:
    # Traces record aten::_convolution rather than aten::conv2d.
    torch.manual_seed(3)
    module = Block().eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        traced = torch.jit.freeze(torch.jit.trace(module, x))
    graph = run_like_eager(module, traced, x)
    weights = [n.inputsAt(1).toIValue() for n in graph.findAllNodes("aten::_convolution")]
    assert len(weights) == 7
    assert all(w.is_contiguous(memory_format=torch.channels_last) for w in weights)
    assert any(not w.is_contiguous() for w in weights)
    assert graph.findAllNodes(RESTORE)


class ConvNeXt(torch.nn.Module):
    """torchvision's ConvNeXt in small: blocks of a depthwise convolution, a LayerNorm
    over the channels of its result permuted to NHWC, an MLP, a layer scale and the
    residual add of the result permuted back; a LayerNorm2d (permute, LayerNorm,
    permute back) before a downsampling convolution; a head that pools by a mean.
    `returns_rows`: the first block's permuted value is also returned (read by other
    than a LayerNorm). `form`: the residual add as "x + y"; as torchvision writes it,
    "y += x"; or timm's ConvNeXt-nano block, "conv_mlp": LayerNorm2d, then an MLP of 1x1
    convolutions reading its channels-last result."""

    def __init__(self, returns_rows: bool = False, form: str = "x + y") -> None:
        super().__init__()
        self.returns_rows, self.form = returns_rows, form
        self.stem = torch.nn.Conv2d(3, 16, 2, stride=2)
        self.dws = torch.nn.ModuleList(
            [torch.nn.Conv2d(c, c, 7, padding=3, groups=c) for c in (16, 16, 32)]
        )
        self.norms = torch.nn.ModuleList([torch.nn.LayerNorm(c, eps=1e-6) for c in (16, 16, 32)])
        self.ups = torch.nn.ModuleList([torch.nn.Linear(c, 4 * c) for c in (16, 16, 32)])
        self.downs = torch.nn.ModuleList([torch.nn.Linear(4 * c, c) for c in (16, 16, 32)])
        self.gammas = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.rand(c, 1, 1) + 0.5) for c in (16, 16, 32)]
        )
        self.conv_ups = torch.nn.ModuleList([torch.nn.Conv2d(c, 4 * c, 1) for c in (16, 16, 32)])
        self.conv_downs = torch.nn.ModuleList([torch.nn.Conv2d(4 * c, c, 1) for c in (16, 16, 32)])
        self.down_norm = torch.nn.LayerNorm(16, eps=1e-6)
        self.down = torch.nn.Conv2d(16, 32, 2, stride=2)
        self.head_norm = torch.nn.LayerNorm(32, eps=1e-6)
        self.fc = torch.nn.Linear(32, 5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.stem(x)
        rows = x
        blocks = zip(
            self.dws,
            self.norms,
            self.ups,
            self.downs,
            self.conv_ups,
            self.conv_downs,
            self.gammas,
            strict=True,
        )
        for i, (dw, norm, up, down, conv_up, conv_down, gamma) in enumerate(blocks):
            if i == 2:
                x = self.down_norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
                x = self.down(x)
            y = dw(x).permute(0, 2, 3, 1)
            if i == 0:
                rows = y
            if self.form == "conv_mlp":
                y = norm(y).permute(0, 3, 1, 2)
                x = conv_down(F.gelu(conv_up(y))) * gamma + x
            elif self.form == "y += x":
                y = gamma * down(F.gelu(up(norm(y)))).permute(0, 3, 1, 2)
                y += x
                x = y
            else:
                x = x + gamma * down(F.gelu(up(norm(y)))).permute(0, 3, 1, 2)
        out = self.fc(self.head_norm(x.mean((2, 3))))
        return out, (rows * 2.0 if self.returns_rows else x)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("layout", [torch.contiguous_format, torch.channels_last])
@pytest.mark.parametrize("form", ["x + y", "y += x", "conv_mlp"])
def test_convnext_blocks_run_channels_last_and_fuse_their_layer_norms(
    channels_last, device: str, layout: torch.memory_format, form: str
) -> None:
    # The permuted values only LayerNorms read stay as they are (contiguous NHWC rows,
    # which the LayerNorms read in place, fused), and the residual adds stay in the
    # region in either order (the block's output is channels-last in eager too, and its
    # first operand sets the sum's layout): the network leaves the region only at its
    # outputs.
    torch.manual_seed(4)
    module = ConvNeXt(form=form).to(device).eval()
    x = torch.randn(2, 3, 32, 32, device=device).contiguous(memory_format=layout)
    graph = run_like_eager(module, frozen(module, device), x)
    assert all(w.is_contiguous(memory_format=torch.channels_last) for w in constant_weights(graph))
    restores = graph.findAllNodes(RESTORE)
    assert len(restores) == 1  # the second output (the last residual sum)
    for permute in graph.findAllNodes("aten::permute"):
        assert permute.inputsAt(0).node().kind() != RESTORE
    groups = [
        {inner.kind() for inner in n.g("Subgraph").nodes()}
        for n in all_nodes(graph)
        if n.kind() == "fuser::FusionGroup"
    ]
    # Each block's and the downsample's LayerNorms; the head's reads a pooled value.
    assert sum("aten::layer_norm" in kinds for kinds in groups) >= 4, groups
    # Each block's depthwise bias adds after the permute, in its LayerNorm's group.
    assert sum({"aten::layer_norm", "aten::add"} <= kinds for kinds in groups) >= 3, groups
    depthwise = [
        conv
        for conv in graph.findAllNodes("aten::conv2d")
        if conv.inputsAt(1).toIValue().shape[1] == 1
    ]
    assert len(depthwise) == 3 and all(c.inputsAt(2).toIValue() is None for c in depthwise)


@pytest.mark.parametrize("device", devices())
def test_permuted_values_that_other_ops_read_are_restored_first(channels_last, device: str) -> None:
    # A permuted value that another op reads too is restored before its permute; values
    # and strides stay eager's.
    torch.manual_seed(5)
    x = torch.randn(2, 3, 32, 32, device=device)
    module = ConvNeXt(returns_rows=True).to(device).eval()
    graph = run_like_eager(module, frozen(module, device), x)
    first = graph.findAllNodes("aten::permute")[0]
    assert first.inputsAt(0).node().kind() == RESTORE
    assert [r.inputsAt(0).node().kind() for r in graph.findAllNodes(RESTORE)] == ["aten::conv2d"]
