"""oneDNN Graph beside the fuser on CPU: enable() leaves it on, our pass runs first and
leaves what oneDNN fuses with a convolution or matmul, oneDNN takes that after us."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import fuser
from helpers import all_nodes, run_optimized

ONEDNN_GROUP = "prim::oneDNNFusionGroup"


@pytest.fixture
def onednn() -> Iterator[None]:
    before = torch.jit.onednn_fusion_enabled()
    torch.jit.enable_onednn_fusion(True)
    yield
    torch.jit.enable_onednn_fusion(before)


class SqueezeExcite(nn.Module):
    """A MobileNetV3 block: conv + hardswish (oneDNN's), hardsigmoid(scale) * x (ours)."""

    def __init__(self, c: int = 16, squeeze: int = 8) -> None:
        super().__init__()
        self.expand = nn.Conv2d(c, c * 2, 1)
        self.fc1 = nn.Conv2d(c * 2, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, c * 2, 1)
        self.project = nn.Conv2d(c * 2, c, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.hardswish(self.expand(x))
        scale = F.adaptive_avg_pool2d(y, 1)
        scale = F.hardsigmoid(self.fc2(F.relu(self.fc1(scale))))
        y = (y * scale + 0.5) * y.sigmoid()
        return self.project(y) + x


def frozen(module: nn.Module) -> torch.jit.ScriptModule:
    torch.manual_seed(0)
    for p in module.parameters():
        p.data.normal_(0, 0.3)
    return torch.jit.freeze(torch.jit.script(module.eval()))


def kinds_by_owner(graph: torch._C.Graph) -> tuple[list[str], list[str], list[str]]:
    """Node kinds inside our groups, inside oneDNN's groups, and outside both."""
    ours: list[str] = []
    theirs: list[str] = []
    outside: list[str] = []
    for node in all_nodes(graph):
        if node.kind() == "fuser::FusionGroup":
            ours += [n.kind() for n in node.g("Subgraph").nodes()]
        elif node.kind().startswith(ONEDNN_GROUP):
            theirs += [n.kind() for n in node.g("Subgraph").nodes()]
        elif node.kind().startswith("aten::"):
            outside.append(node.kind())
    return ours, theirs, outside


def run_frozen(model: torch.jit.ScriptModule, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return run_optimized(model, x)


@pytest.mark.parametrize("onednn_first", [True, False])
def test_both_fuse_their_part_in_either_enable_order(onednn_first: bool) -> None:
    before = torch.jit.onednn_fusion_enabled()
    try:
        if onednn_first:
            torch.jit.enable_onednn_fusion(True)
            fuser.enable()
        else:
            fuser.enable()
            torch.jit.enable_onednn_fusion(True)
        module = SqueezeExcite()
        model = frozen(module)
        x = torch.randn(2, 16, 9, 9)
        out = run_frozen(model, x)
        with torch.no_grad():
            expected = module(x)
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
        ours, theirs, _ = kinds_by_owner(torch.jit.last_executed_optimized_graph())
        # The elementwise tail around the squeeze-excite scale is ours ...
        assert "aten::hardsigmoid" in ours and "aten::sigmoid" in ours and "aten::mul" in ours
        # ... the convolutions, with the post-ops oneDNN fuses into them, are oneDNN's.
        assert theirs.count("aten::conv2d") >= 3
        assert "aten::hardswish" in theirs and "aten::hardswish" not in ours
        assert "aten::relu" not in ours
    finally:
        torch.jit.enable_onednn_fusion(before)


def test_enable_keeps_onednn_as_the_user_set_it(onednn: None) -> None:
    fuser.enable()
    assert torch.jit.onednn_fusion_enabled()
    fuser.disable()
    assert torch.jit.onednn_fusion_enabled()


def test_post_ops_left_to_onednn_say_why(onednn: None, capfd: pytest.CaptureFixture) -> None:
    from helpers import run_python

    result = run_python(
        """
        import torch, torch.nn as nn, fuser
        torch.jit.enable_onednn_fusion(True)
        fuser.enable()
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(4, 4, 3, padding=1)
            def forward(self, x):
                return torch.relu(self.conv(x)) * 2.0 + x.sigmoid()
        m = torch.jit.freeze(torch.jit.script(M().eval()))
        with torch.no_grad():
            for _ in range(3):
                m(torch.randn(1, 4, 8, 8))
        """,
        env={"FUSER_DUMP": "reasons"},
    )
    assert result.returncode == 0, result.stderr
    assert "aten::relu" in result.stderr
    assert "left to oneDNN Graph, which fuses it into its aten::conv2d partition" in result.stderr


def test_elementwise_only_work_is_ours(onednn: None) -> None:
    """oneDNN Graph also groups plain elementwise chains; with the fuser on they are ours."""

    class TanhGelu(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(32, 64)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.fc(x)
            return 0.5 * h * (1.0 + torch.tanh(0.79788456 * (h + 0.044715 * h * h * h)))

    fuser.enable()
    module = TanhGelu()
    model = frozen(module)
    x = torch.randn(8, 32)
    out = run_frozen(model, x)
    with torch.no_grad():
        torch.testing.assert_close(out, module(x), rtol=1e-4, atol=1e-4)
    ours, theirs, _ = kinds_by_owner(torch.jit.last_executed_optimized_graph())
    assert "aten::tanh" in ours
    assert "aten::linear" in theirs


class ConvChain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (torch.relu(self.conv(x)) * 2.0).sigmoid() - x


@pytest.mark.parametrize("with_onednn", [False, True])
def test_post_ops_are_ours_only_without_onednn(with_onednn: bool) -> None:
    before = torch.jit.onednn_fusion_enabled()
    torch.jit.enable_onednn_fusion(with_onednn)
    try:
        fuser.enable()
        module = ConvChain()
        model = frozen(module)
        x = torch.randn(2, 4, 8, 8)
        out = run_frozen(model, x)
        with torch.no_grad():
            torch.testing.assert_close(out, module(x), rtol=1e-4, atol=1e-4)
        ours, theirs, _ = kinds_by_owner(torch.jit.last_executed_optimized_graph())
        # oneDNN applies the whole chain in its convolution's epilogue.
        post_ops = ["aten::relu", "aten::mul", "aten::sigmoid"]
        assert all((op in theirs) == with_onednn for op in post_ops)
        assert all((op in ours) == (not with_onednn) for op in post_ops)
    finally:
        torch.jit.enable_onednn_fusion(before)


@pytest.mark.parametrize("leave", ["1", "0"])
def test_flag_decides_who_takes_the_post_ops(leave: str) -> None:
    from helpers import run_python

    result = run_python(
        """
        import torch, torch.nn as nn, fuser
        torch.jit.enable_onednn_fusion(True)
        fuser.enable()
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(4, 4, 3, padding=1)
            def forward(self, x):
                return (torch.relu(self.conv(x)) * 2.0).sigmoid()
        module = M().eval()
        m = torch.jit.freeze(torch.jit.script(module))
        x = torch.randn(1, 4, 8, 8)
        with torch.no_grad():
            for _ in range(3):
                out = m(x)
            torch.testing.assert_close(out, module(x))
        graph = torch.jit.last_executed_optimized_graph()
        ours = [n.kind() for g in graph.findAllNodes("fuser::FusionGroup")
                for n in g.g("Subgraph").nodes()]
        print("ours:", sorted(k for k in ours if k.startswith("aten::")))
        """,
        env={"FUSER_LEAVE_TO_ONEDNN": leave},
    )
    assert result.returncode == 0, result.stderr
    expected = "[]" if leave == "1" else "['aten::add', 'aten::mul', 'aten::relu', 'aten::sigmoid']"
    assert f"ours: {expected}" in result.stdout


def test_onednn_takes_the_gpt2_blocks_products_beside_our_groups(onednn: None) -> None:
    """oneDNN Graph alone throws on the GPT-2 block ("could not add op to the graph":
    attention's scale `1.0 / math.sqrt(head)` is scalar math its pass maps as a tensor
    op). Beside the fuser that scalar math is hidden from its pass: it takes the linears
    and matmuls, we take the norms, the softmax and the GELU, and no ATen addmm is left
    to copy a bias."""
    from fuser.bench.models import _gpt2_block

    torch.manual_seed(0)
    module = _gpt2_block({"B": 1, "T": 16, "D": 64, "heads": 4}).eval()
    x = torch.randn(1, 16, 64)
    fuser.enable()
    model = torch.jit.freeze(torch.jit.script(module))
    out = run_frozen(model, x)
    with torch.no_grad():
        torch.testing.assert_close(out, module(x), rtol=1e-4, atol=1e-4)
    graph = torch.jit.last_executed_optimized_graph()
    ours, theirs, outside = kinds_by_owner(graph)
    assert {"aten::layer_norm", "aten::softmax", "aten::tanh"} <= set(ours)
    assert theirs.count("aten::linear") == 4
    assert theirs.count("aten::matmul") == 2
    assert "aten::linear" not in outside and "aten::matmul" not in outside
    # The scale's sqrt runs where it was, unwrapped (none left in any subgraph either).
    assert "aten::sqrt" in outside
    assert "fuser::HiddenFromOneDnn" not in str(graph)


def test_the_gpt2_blocks_training_step_keeps_its_gradients(onednn: None) -> None:
    """Scalar arithmetic is hidden from oneDNN's pass in autodiff's graphs too (it then
    partitions the forward's), and the gradients stay eager's. Hiding list arithmetic as
    well (autodiff's `_size_if_not_equal`) gave the input a gradient 1.77 off (T=16)
    and failed the backward's matmul (T=32)."""
    from fuser.bench.models import _gpt2_block

    fuser.enable()
    for t in (16, 32):
        torch.manual_seed(0)
        module = _gpt2_block({"B": 1, "T": t, "D": 64, "heads": 4}).eval()  # no dropout
        model = torch.jit.script(module)
        x = torch.randn(1, t, 64, requires_grad=True)
        for _ in range(3):  # profile, optimize, run the optimized forward and backward
            x.grad = None
            model(x).sum().backward()
        fused = x.grad
        x.grad = None
        module(x).sum().backward()
        torch.testing.assert_close(fused, x.grad, rtol=1e-4, atol=1e-4)


def test_what_onednn_cannot_take_after_us_is_fused_by_us(onednn: None) -> None:
    """Nodes left to oneDNN Graph must not end up fused by nobody. A transformer MLP
    (layer_norm, then linear + gelu and linear + residual add: oneDNN's patterns) is a
    graph oneDNN Graph takes alone, but its partitioning throws on the graph our pass
    makes of it when we leave it its patterns (BERT's layers); the graph is then fused
    again with nothing left to it."""
    from helpers import run_python

    result = run_python(
        """
        import torch, torch.nn as nn, torch.nn.functional as F, fuser
        torch.jit.enable_onednn_fusion(True)
        fuser.enable()
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.up = nn.Linear(64, 256)
                self.down = nn.Linear(256, 64)
            def forward(self, x):
                x = F.layer_norm(x, [64])
                return self.down(F.gelu(self.up(x))) + x
        torch.manual_seed(0)
        eager = M().eval()
        m = torch.jit.freeze(torch.jit.script(eager))
        x = torch.randn(2, 16, 64)
        with torch.no_grad():
            for _ in range(3):
                out = m(x)
            torch.testing.assert_close(out, eager(x), rtol=1e-4, atol=1e-4)
        graph = torch.jit.last_executed_optimized_graph()
        def nodes(block):
            for n in block.nodes():
                yield n
                for b in n.blocks():
                    yield from nodes(b)
        groups = [n for n in nodes(graph) if n.kind() == "fuser::FusionGroup"]
        ours = sorted({i.kind() for g in groups for i in g.g("Subgraph").nodes()
                       if i.kind().startswith("aten::")})
        outside = sorted({n.kind() for n in nodes(graph) if n.kind().startswith("aten::")})
        print("ours:", ours)
        print("outside:", outside)
        print("groups:", len(groups), fuser.stats()["groups_formed"])
        """,
        env={"FUSER_DUMP": "reasons"},
    )
    assert result.returncode == 0, result.stderr
    assert "oneDNN Graph's pass throws on the fused graph" in result.stderr
    assert "ours: ['aten::add', 'aten::gelu', 'aten::layer_norm']" in result.stdout
    outside = result.stdout.split("outside:")[1].splitlines()[0]
    assert outside == " []"
    # Only the graph that runs counts its groups.
    counted = result.stdout.split("groups:")[1].split()
    assert counted[0] == counted[1]
