"""In-place ops made functional (csrc/passes/inplace.cpp) and types propagated to values
profiling missed (csrc/passes/type_propagation.cpp): values, dtypes, shapes and
strides equal eager's, on scripted, traced, frozen and optimize_for_inference models;
unsafe writes stay in place."""

from __future__ import annotations

import textwrap

import pytest
import torch
from torch import nn

import fuser
from helpers import (
    FUSION_GROUP,
    all_nodes,
    count_kind,
    devices,
    run_optimized,
    run_python,
    script_from_source,
)

cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def assert_same(actual: torch.Tensor, expected: torch.Tensor) -> None:
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    assert actual.stride() == expected.stride()
    torch.testing.assert_close(actual, expected)


def group_kinds(graph: torch._C.Graph) -> list[set[str]]:
    """The node kinds inside each fusion group of `graph`."""
    return [
        {n.kind() for n in node.g("Subgraph").nodes()}
        for node in all_nodes(graph)
        if node.kind() == FUSION_GROUP
    ]


CHAIN = """
def f(x, y):
    z = x * y
    z.add_(1.0)
    z.relu_()
    return z.sigmoid()
"""


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_inplace_chain_forms_one_group(fused, device, dtype):
    fn = script_from_source(CHAIN)
    x = torch.randn(8, 16, device=device, dtype=dtype)
    y = torch.randn(8, 16, device=device, dtype=dtype)
    out = run_optimized(fn, x, y)
    assert_same(out, eager_chain(x, y))
    graph = torch.jit.last_executed_optimized_graph()
    assert count_kind(graph, "aten::add_") == 0
    assert count_kind(graph, "aten::relu_") == 0
    kinds = group_kinds(graph)
    assert len(kinds) == 1
    assert {"aten::mul", "aten::add", "aten::relu", "aten::sigmoid"} <= kinds[0]


def eager_chain(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    z = x * y
    z.add_(1.0)
    z.relu_()
    return z.sigmoid()


# In-place variants of table ops, as models write them: (call, in-place kind).
INPLACE_CALLS = [
    ("z.add_(y)", "aten::add_"),
    ("z += y", "aten::add_"),
    ("z.sub_(y, alpha=2)", "aten::sub_"),
    ("z -= 0.5", "aten::sub_"),
    ("z.mul_(y)", "aten::mul_"),
    ("z *= 1.5", "aten::mul_"),
    ("z.div_(y.abs() + 1.0)", "aten::div_"),
    ("z /= 4.0", "aten::div_"),
    ("z.relu_()", "aten::relu_"),
    ("torch.nn.functional.relu(z, inplace=True)", "aten::relu_"),
    ("torch.nn.functional.silu(z, inplace=True)", "aten::silu_"),
    ("torch.nn.functional.hardswish(z, inplace=True)", "aten::hardswish_"),
    ("torch.nn.functional.hardsigmoid(z, inplace=True)", "aten::hardsigmoid_"),
    ("torch.nn.functional.leaky_relu(z, 0.2, inplace=True)", "aten::leaky_relu_"),
    ("torch.nn.functional.hardtanh(z, -0.5, 0.5, inplace=True)", "aten::hardtanh_"),
    ("torch.nn.functional.elu(z, inplace=True)", "aten::elu_"),
    ("z.clamp_(-0.5, 0.5)", "aten::clamp_"),
    ("z.clamp_min_(0.1)", "aten::clamp_min_"),
    ("z.sigmoid_()", "aten::sigmoid_"),
    ("z.tanh_()", "aten::tanh_"),
    ("z.exp_()", "aten::exp_"),
    ("z.neg_()", "aten::neg_"),
]


@pytest.mark.parametrize(("call", "kind"), INPLACE_CALLS, ids=[c for c, _ in INPLACE_CALLS])
def test_each_inplace_table_op_fuses_like_its_functional_form(fused, call, kind):
    source = f"""
def f(x, y):
    z = x * 2.0
    {call}
    return z * 3.0
"""
    fn = script_from_source(source)
    x, y = torch.randn(8, 16), torch.randn(8, 16)
    scope = {"torch": torch}
    exec(source, scope)  # the same code, eager
    assert_same(run_optimized(fn, x, y), scope["f"](x, y))
    graph = torch.jit.last_executed_optimized_graph()
    assert count_kind(graph, kind) == 0
    kinds = group_kinds(graph)
    assert len(kinds) == 1 and kind[:-1] in kinds[0]


# In-place writes on a transposed self, their result returned: the write keeps self's
# layout whatever the functional form allocates (masked_fill clones row-major), also where
# the function was profiled on row-major inputs (the guard does not check strides). A
# view of the result then is a copy, as in eager, so the later write leaves it alone.
LAYOUT_CALLS = [
    ("z.masked_fill_(x > 0.0, 0.5)", "aten::masked_fill_"),
    ("z.masked_fill_(y > 0.0, torch.tensor(0.25))", "aten::masked_fill_"),
    ("z.add_(y)", "aten::add_"),
    ("z.clamp_(-0.5, 0.5)", "aten::clamp_"),
    ("z.relu_()", "aten::relu_"),
]


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("profiled", ["transposed", "row-major"])
@pytest.mark.parametrize(("call", "kind"), LAYOUT_CALLS, ids=[c for c, _ in LAYOUT_CALLS])
def test_an_inplace_write_keeps_its_transposed_selfs_layout(fused, device, profiled, call, kind):
    source = f"""
def f(x, y):
    z = torch.sigmoid(x)
    {call}
    z.reshape(-1).mul_(0.0)
    return z
"""
    fn = script_from_source(source)
    scope = {"torch": torch}
    exec(source, scope)  # the same code, eager

    def inputs(layout: str) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = (torch.randn(16, 8, device=device).t() for _ in range(2))
        return (x, y) if layout == "transposed" else (x.contiguous(), y.contiguous())

    for _ in range(2):
        fn(*inputs(profiled))
    x, y = inputs("transposed")
    assert_same(fn(x, y), scope["f"](x, y))
    graph = torch.jit.last_executed_optimized_graph()
    # masked_fill_ becomes the functional form that keeps self's strides, in a group: but
    # for a CPU tensor value beside CUDA tensors, which no group reads (another device):
    # that write, made functional and taken by no group, is written in place again.
    functional = "fuser::masked_fill_like_self" if kind == "aten::masked_fill_" else kind[:-1]
    in_group = any(functional in kinds for kinds in group_kinds(graph))
    cpu_value_on_cuda = device == "cuda" and "torch.tensor(" in call
    if cpu_value_on_cuda:
        assert not in_group and count_kind(graph, kind) == 1
    else:
        assert in_group and count_kind(graph, kind) == 0


@pytest.mark.parametrize("device", devices())
def test_an_inplace_write_keeps_selfs_stride_of_a_size_one_dim(fused, device):
    # A transposed [1, 4] is [4, 1] of strides (1, 4): TensorIterator calls it contiguous
    # and would give clamp's result strides (1, 1); the write keeps (1, 4).
    source = """
def f(x):
    d = x.double() * 2.0
    d.clamp_(max=1.5)
    return d
"""
    fn = script_from_source(source)
    scope = {"torch": torch}
    exec(source, scope)  # the same code, eager
    x = torch.linspace(-1, 1, 4, device=device).view(1, 4).t()
    got = run_optimized(fn, x)
    assert got.stride() == (1, 4)
    assert_same(got, scope["f"](x))
    assert count_kind(torch.jit.last_executed_optimized_graph(), "aten::clamp_") == 0


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize(
    "call, kind",
    [("t.relu_()", "relu_"), ("t.add_(1.0)", "add_"), ("t.mul_(t)", "mul_"), ("t += 0.5", "add_")],
)
def test_a_write_no_group_took_is_written_in_place_again(fused, device, call, kind):
    # clone keeps x's strides: [1, 40] of (1, 1), which TensorIterator calls contiguous
    # and lays out (40, 1). Left functional, the lone op would run as ATen's and give
    # those; eager's write keeps (1, 1), and so does the write made in place again
    # (passes/lone_writes.cpp). (u forms a group, so the pass keeps its graph; groups of
    # one node are not kept, as outside the tests, so the write joins none.)
    fuser._C._set_keep_singletons(False)
    source = f"""
def f(x, y):
    t = x.clone()
    {call}
    u = (y * 2.0).sigmoid() + 1.0
    return t, u
"""
    fn = script_from_source(source)
    scope = {"torch": torch}
    exec(source, scope)
    x, y = torch.randn(40, 1, device=device).t(), torch.randn(8, device=device)
    got, _ = run_optimized(fn, x, y)
    want, _ = scope["f"](x, y)
    assert got.stride() == want.stride() == (1, 1)
    assert_same(got, want)
    graph = torch.jit.last_executed_optimized_graph()
    assert fuser.stats()["groups_formed"] >= 1
    assert count_kind(graph, f"aten::{kind}") == 1
    assert count_kind(graph, f"aten::{kind[:-1]}") == 0  # no functional form left


_ODD_STRIDES_SOURCE = """
def f(x):
    d = x.double() * 2.0
    d.clamp_(max=1.5)
    return d
"""


@pytest.mark.parametrize("device", devices())
def test_a_fallback_keeps_selfs_stride_of_a_size_one_dim(fused, device):
    # The group of test_an_inplace_write_keeps_selfs_stride_of_a_size_one_dim, called
    # with a float64 x: its guard fails and the fallback graph runs the subgraph through
    # the interpreter, where clamp (functional) would give d strides (1, 1); the
    # fallback writes in place again and keeps (1, 4), as eager does.
    fn = script_from_source(_ODD_STRIDES_SOURCE)
    scope = {"torch": torch}
    exec(_ODD_STRIDES_SOURCE, scope)
    x = torch.linspace(-1, 1, 4, device=device).view(1, 4).t()
    run_optimized(fn, x)
    failures = fuser.stats()["guard_failures"]
    x64 = x.double()
    for _ in range(3):  # the fallback's profiling call and its optimized calls
        got = fn(x64)
        assert got.stride() == (1, 4)
        assert_same(got, scope["f"](x64))
    assert fuser.stats()["guard_failures"] > failures


def test_a_group_run_interpreted_keeps_selfs_stride_of_a_size_one_dim():
    # FUSER_EXECUTOR=interpreter runs every group through the interpreter, as a group
    # its kernel cannot serve runs.
    result = run_python(
        f"""
        import torch, fuser
        torch._C._jit_set_num_profiled_runs(1)
        fuser._C._set_keep_singletons(True)
        {textwrap.indent(_ODD_STRIDES_SOURCE, "        ").strip()}
        g = torch.jit.script(f)
        x = torch.linspace(-1, 1, 4).view(1, 4).t()
        with fuser.enabled(True):
            for _ in range(3):
                got = g(x)
        assert fuser.stats()["interpreted_runs"] >= 1, fuser.stats()
        assert got.stride() == f(x).stride() == (1, 4), got.stride()
        assert torch.equal(got, f(x))
        """,
        env={"FUSER_EXECUTOR": "interpreter"},
    )
    assert result.returncode == 0, result.stderr


class BasicBlock(nn.Module):
    """torchvision's resnet BasicBlock, written out (torchvision may be absent)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)
        out = self.conv2(out)
        out = self.bn2(out)
        out += identity
        out = self.relu(out)
        return out


def make_block(dtype: torch.dtype, device: str = "cpu") -> nn.Module:
    torch.manual_seed(0)
    block = BasicBlock(8)
    with torch.no_grad():
        for bn in (block.bn1, block.bn2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 1.5)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
    return block.eval().to(device=device, dtype=dtype)


def residual_group_formed(graph: torch._C.Graph) -> bool:
    """A group computes the residual add and the relu after it (unless freezing gave
    conv + add + relu to cuDNN, as it may on CUDA)."""
    if count_kind(graph, "aten::cudnn_convolution_add_relu"):
        return True
    return any({"aten::add", "aten::relu"} <= kinds for kinds in group_kinds(graph))


def check_block(module, block: nn.Module, x: torch.Tensor, reference=None) -> torch._C.Graph:
    """`module` (a compiled `block`) run with the fuser equals eager, or, where freezing
    changed the arithmetic (conv and batch norm folded in bfloat16), `reference`: the
    same compilation run without the fuser."""
    with torch.no_grad():
        if reference is None:
            expected = block(x.clone())
        else:
            with fuser.enabled(False):
                expected = run_optimized(reference, x)
        out = run_optimized(module, x)
        graph = torch.jit.last_executed_optimized_graph()
    assert_same(out, expected)
    return graph


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_frozen_basic_block_fuses_residual_add_and_relu(fused, device, dtype):
    block = make_block(dtype, device)
    frozen = torch.jit.freeze(torch.jit.script(block))
    x = torch.randn(2, 8, 6, 6, device=device, dtype=dtype)
    reference = torch.jit.freeze(torch.jit.script(block))
    # Row-major convolutions, as the reference's: channels-last ones may take other
    # cuDNN algorithms, which round otherwise in TF32 (test_channels_last.py).
    fuser._C._set_channels_last(False, False)
    try:
        graph = check_block(frozen, block, x, reference)
    finally:
        fuser._C._set_channels_last(True, False)
    assert residual_group_formed(graph), graph
    assert count_kind(graph, "aten::add_") == 0


def test_scripted_basic_block_fuses_residual_add_and_relu(fused):
    block = make_block(torch.float32)
    graph = check_block(torch.jit.script(block), block, torch.randn(2, 8, 6, 6))
    assert residual_group_formed(graph), graph


def test_training_step_with_inplace_writes_never_reaches_the_pass(fused):
    """README's limit, pinned: a training step (gradients on, training mode) of the
    BasicBlock, whose in-place ReLU and `+=` write values that need gradients. Autodiff
    forms no differentiable graph there, and TorchScript runs custom passes only inside
    those when gradients are needed: no group, and results and gradients are eager's.
    If this starts forming groups, TorchScript changed and the README's note is stale.
    A class of its own: torch.jit.script keeps one executor per class and method, and
    the other tests' plans of BasicBlock would be this one's."""

    class TrainingBlock(BasicBlock):
        pass

    block = make_block(torch.float32).train()
    scripted = torch.jit.script(TrainingBlock(8))
    scripted.load_state_dict(block.state_dict())
    scripted.train()
    for step in range(4):
        x = torch.randn(2, 8, 6, 6, generator=torch.Generator().manual_seed(step))
        ours, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
        out, want = scripted(ours), block(theirs)
        torch.testing.assert_close(out, want)
        (out * out).sum().backward()
        (want * want).sum().backward()
        # The same ATen ops, whose convolution backward may sum in another order per run.
        torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-4, atol=1e-4)
        for a, b in zip(scripted.parameters(), block.parameters(), strict=True):
            torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-4)
    assert fuser.stats()["groups_formed"] == 0
    graph = torch.jit.last_executed_optimized_graph()
    assert count_kind(graph, "prim::DifferentiableGraph") == 0


def test_traced_frozen_basic_block(fused):
    block = make_block(torch.float32)
    x = torch.randn(2, 8, 6, 6)
    with torch.no_grad():
        traced = torch.jit.freeze(torch.jit.trace(block, x.clone()))
    graph = check_block(traced, block, x)
    assert residual_group_formed(graph), graph


def test_saved_and_loaded_frozen_basic_block(fused, tmp_path):
    block = make_block(torch.float32)
    path = str(tmp_path / "block.pt")
    torch.jit.save(torch.jit.freeze(torch.jit.script(block)), path)
    graph = check_block(torch.jit.load(path), block, torch.randn(2, 8, 6, 6))
    assert residual_group_formed(graph), graph


def test_traced_function_with_inplace_ops(fused):
    # The trace records 1.0 as a 0-dim tensor constant: it is read as the number.
    x, y = torch.randn(8, 16), torch.randn(8, 16)
    traced = torch.jit.trace(eager_chain, (x, y))
    assert_same(run_optimized(traced, x, y), eager_chain(x, y))
    kinds = group_kinds(torch.jit.last_executed_optimized_graph())
    assert len(kinds) == 1
    assert {"aten::mul", "aten::add", "aten::relu", "aten::sigmoid"} <= kinds[0]


def test_channels_last_frozen_basic_block_keeps_layout(fused):
    block = make_block(torch.float32).to(memory_format=torch.channels_last)
    frozen = torch.jit.freeze(torch.jit.script(block))
    x = torch.randn(2, 8, 6, 6).to(memory_format=torch.channels_last)
    check_block(frozen, block, x)


def test_optimize_for_inference_basic_block_equals_eager(fused):
    block = make_block(torch.float32)
    optimized = torch.jit.optimize_for_inference(torch.jit.script(block))
    check_block(optimized, block, torch.randn(2, 8, 6, 6))


@pytest.mark.parametrize("device", devices())
def test_promoting_write_keeps_self_dtype(fused, device):
    fn = script_from_source(
        """
        def f(x, y):
            z = x * 2.0
            z += y
            return z.relu()
        """
    )
    x = torch.randn(8, 16, device=device, dtype=torch.float16)
    y = torch.randn(8, 16, device=device, dtype=torch.float32)
    z = x * 2.0
    z += y
    assert_same(run_optimized(fn, x, y), z.relu())
    graph = torch.jit.last_executed_optimized_graph()
    assert count_kind(graph, "aten::add_") == 0


def test_integer_write_stays_integer(fused):
    fn = script_from_source(
        """
        def f(x, y):
            z = x * 3
            z += y
            z.clamp_(-5, 5)
            return z - 1
        """
    )
    x = torch.randint(-4, 4, (8, 16), dtype=torch.int32)
    y = torch.randint(-4, 4, (8, 16), dtype=torch.int64)
    expected = (x * 3).add_(y).clamp_(-5, 5) - 1
    assert_same(run_optimized(fn, x, y), expected)


def test_comparison_write_keeps_float(fused):
    fn = script_from_source(
        """
        def f(x, y):
            z = x + 1.0
            z.lt_(y)
            return z * 2.0
        """
    )
    x, y = torch.randn(8, 16), torch.randn(8, 16)
    assert_same(run_optimized(fn, x, y), (x + 1.0).lt_(y) * 2.0)
    assert count_kind(torch.jit.last_executed_optimized_graph(), "aten::lt_") == 0


def test_write_to_if_output_made_in_each_branch(fused):
    fn = script_from_source(
        """
        def f(x, c: bool):
            if c:
                z = x * 2.0
            else:
                z = x.sigmoid()
            z.relu_()
            return z * 3.0
        """
    )
    x = torch.randn(8, 16)
    for c in (True, False):
        assert_same(run_optimized(fn, x, c), (x * 2.0 if c else x.sigmoid()).relu() * 3.0)
        assert count_kind(torch.jit.last_executed_optimized_graph(), "aten::relu_") == 0


def test_write_inside_loop_equals_eager(fused):
    fn = script_from_source(
        """
        def f(x, n: int):
            z = x * 2.0
            for _ in range(n):
                z.mul_(0.5)
                z.add_(x)
            return z.tanh()
        """
    )
    x = torch.randn(8, 16)
    z = x * 2.0
    for _ in range(3):
        z.mul_(0.5)
        z.add_(x)
    assert_same(run_optimized(fn, x, 3), z.tanh())


# Unsafe writes: each stays in place, and results (and mutated inputs) equal eager's.


def test_write_to_graph_input_stays(fused):
    fn = script_from_source(
        """
        def f(x, y):
            x.add_(y)
            return x.relu() * y
        """
    )
    x, y = torch.randn(8, 16), torch.randn(8, 16)
    for _ in range(3):
        mine, theirs = x.clone(), x.clone()
        out = fn(mine, y)
        theirs.add_(y)
        assert_same(out, theirs.relu() * y)
        assert_same(mine, theirs)
    assert count_kind(torch.jit.last_executed_optimized_graph(), "aten::add_") == 1


def test_write_through_view_read_later_stays(fused):
    fn = script_from_source(
        """
        def f(x):
            z = x * 2.0
            v = z[0]
            v.add_(1.0)
            return z.sigmoid()
        """
    )
    x = torch.randn(4, 16)
    z = x * 2.0
    z[0].add_(1.0)
    assert_same(run_optimized(fn, x), z.sigmoid())
    assert count_kind(torch.jit.last_executed_optimized_graph(), "aten::add_") == 1


def test_write_through_list_alias_stays(fused):
    # A run-time index keeps TorchScript's list peephole from resolving the element.
    fn = script_from_source(
        """
        def f(x, i: int):
            z = x * 2.0
            zs = [z, x * 3.0]
            zs[i].relu_()
            return z.sigmoid() + zs[1]
        """
    )
    x = torch.randn(4, 16)
    z = x * 2.0
    zs = [z, x * 3.0]
    zs[0].relu_()
    assert_same(run_optimized(fn, x, 0), z.sigmoid() + zs[1])
    assert count_kind(torch.jit.last_executed_optimized_graph(), "aten::relu_") == 1


def test_reasons_say_why_a_write_stays():
    result = run_python(
        """
        import torch, fuser
        torch._C._jit_set_num_profiled_runs(1)
        @torch.jit.script
        def f(x, y):
            x.add_(y)
            return x.relu() * y
        with fuser.enabled(True):
            for _ in range(3):
                f(torch.randn(4, 4), torch.randn(4, 4))
        """,
        env={"FUSER_DUMP": "reasons"},
    )
    assert result.returncode == 0, result.stderr
    assert "in-place op not made functional: writes to a graph or block input %x" in result.stderr


@cuda_only
def test_cuda_frozen_basic_block_half(fused):
    block = make_block(torch.float16, "cuda")
    frozen = torch.jit.freeze(torch.jit.script(block))
    x = torch.randn(2, 8, 6, 6, device="cuda", dtype=torch.float16)
    graph = check_block(frozen, block, x, torch.jit.freeze(torch.jit.script(block)))
    assert residual_group_formed(graph), graph
