"""Fusion under torch.autocast: the casts TorchScript's autocast pass inserts
(aten::_autocast_to_reduced_precision / _to_full_precision, csrc/ops/casts.cpp) join
groups; outputs read only for their dtype leave groups (csrc/passes/guard.cpp); exact
round trips of conversions inside a group are removed (csrc/passes/round_trips.cpp);
the backward's `grad.to(self_dtype)` fuses with its int dtype pinned by the guard; a node
the dispatcher's autocast ran in another dtype stays unfused (csrc/passes/fusibility.cpp).

How users write it, and what TorchScript does on this torch (2.13): the JIT autocast
pass is on by default (torch._C._jit_set_autocast_mode), for CPU as for CUDA. Both a
scripted function called under an outer `with torch.autocast(...)` and one with the
`with` block inside get the casts in their graph. With the pass off, the casts are not
inserted and the ops are autocast by the dispatcher as in eager. The pass and eager
autocast differ on elementwise ops: the pass casts the inputs of ops such as add and mul
to float32 where eager would compute in the reduced dtype. The fuser keeps TorchScript's
results either way; where the two agree on dtypes (GEMM epilogues, RNN cells with
float32 biases and states) the fused outputs have eager autocast's dtypes, and its values
within the autocast dtype's rounding (eager rounds some sums TorchScript keeps in float)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from conftest import fuse_ir, groups

import fuser
from helpers import FUSION_GROUP, LSTM_CELL, all_nodes, devices, script_from_source
from helpers import eager_from_source as eager

REDUCED = "aten::_autocast_to_reduced_precision"
FULL = "aten::_autocast_to_full_precision"
CASTS = (REDUCED, FULL)

EPILOGUE = """
def f(x, w, b):
    return torch.nn.functional.gelu(torch.mm(x, w) + b) * 2.0
"""

EPILOGUE_WITH_INSIDE = """
def f(x, w, b):
    with torch.autocast("{device}", dtype={dtype}):
        return torch.nn.functional.gelu(torch.mm(x, w) + b) * 2.0
"""

CHAIN = """
def f(x, w):
    y = torch.mm(x, w)
    return torch.relu(y) * 2.0, torch.sigmoid(y + 1.0), torch.exp(y)
"""

LSTM = LSTM_CELL

CHAIN_OPS = {"aten::relu", "aten::mul", "aten::add", "aten::sigmoid", "aten::exp"}

# (device, autocast dtype): CPU autocasts to bfloat16, CUDA to float16 or bfloat16. The
# CUDA cases skip on machines without a GPU.
NO_GPU = pytest.mark.skipif("cuda" not in devices(), reason="no CUDA device")
CASES = [
    pytest.param("cpu", torch.bfloat16, id="cpu-bfloat16"),
    pytest.param("cuda", torch.float16, id="cuda-float16", marks=NO_GPU),
    pytest.param("cuda", torch.bfloat16, id="cuda-bfloat16", marks=NO_GPU),
]


@pytest.fixture
def fused_min2(fused: None) -> Iterator[None]:
    """The fuser on with its default minimum group size: single casts stay unfused."""
    fuser._C._set_keep_singletons(False)
    yield


@pytest.fixture
def jit_autocast_off() -> Iterator[None]:
    previous = torch._C._jit_set_autocast_mode(False)
    try:
        yield
    finally:
        torch._C._jit_set_autocast_mode(previous)


def as_tuple(out: Any) -> tuple[torch.Tensor, ...]:
    return out if isinstance(out, tuple) else (out,)


def fusion_groups(graph: torch._C.Graph) -> list[torch._C.Node]:
    return [n for n in all_nodes(graph) if n.kind() == FUSION_GROUP]


def compute_kinds(group: torch._C.Node) -> list[str]:
    return [n.kind() for n in group.g("Subgraph").nodes() if n.kind() != "prim::Constant"]


def without_casts(kinds: list[str]) -> list[str]:
    return sorted(k for k in kinds if k not in CASTS)


def optimized_graph(fn: Any, args: list[torch.Tensor]) -> tuple[torch._C.Graph, Any]:
    """Runs `fn` until optimized; the optimized graph and the result of one more call."""
    for _ in range(3):
        fn(*args)
    graph = torch.jit.last_executed_optimized_graph()
    return graph, fn(*args)


def epilogue_args(device: str, grad: bool = False) -> list[torch.Tensor]:
    shapes = [(16, 32), (32, 24), (24,)]
    return [torch.randn(*s, device=device).requires_grad_(grad) for s in shapes]


def lstm_args(device: str, grad: bool = False) -> list[torch.Tensor]:
    batch, inputs, hidden = 3, 10, 16
    shapes = [
        (batch, inputs),
        (batch, hidden),
        (batch, hidden),
        (4 * hidden, inputs),
        (4 * hidden, hidden),
        (4 * hidden,),
        (4 * hidden,),
    ]
    return [torch.randn(*s, device=device).requires_grad_(grad) for s in shapes]


LOW_PRECISION = {
    torch.float16: {"rtol": 4e-3, "atol": 4e-3},
    torch.bfloat16: {"rtol": 3e-2, "atol": 3e-2},
}


def assert_same_results(got: Any, expected: Any) -> None:
    got, expected = as_tuple(got), as_tuple(expected)
    assert [g.dtype for g in got] == [e.dtype for e in expected]
    assert [g.shape for g in got] == [e.shape for e in expected]
    assert [g.stride() for g in got] == [e.stride() for e in expected]
    torch.testing.assert_close(got, expected)


# ---- Graph level ---------------------------------------------------------------------

BF16 = "BFloat16(4, 5, strides=[5, 1], requires_grad=0, device=cpu)"


def test_autocast_casts_join_the_group() -> None:
    graph = fuse_ir(f"""
graph(%x : $T, %y : $T):
  %no : bool = prim::Constant[value=0]()
  %yes : bool = prim::Constant[value=1]()
  %half : int = prim::Constant[value=5]()
  %bf16 : int = prim::Constant[value=15]()
  %r : {BF16} = {REDUCED}(%x, %no, %yes, %half, %bf16)
  %s : {BF16} = aten::relu(%r)
  %f : $T = {FULL}(%s, %no, %yes)
  %o : $T = aten::mul(%f, %y)
  return (%o)""")
    (group,) = groups(graph)
    assert compute_kinds(group) == [REDUCED, "aten::relu", FULL, "aten::mul"]


def test_autocast_cast_with_a_flag_from_outside_is_refused() -> None:
    graph = fuse_ir(f"""
graph(%x : $T, %y : $T, %on : bool):
  %no : bool = prim::Constant[value=0]()
  %half : int = prim::Constant[value=5]()
  %bf16 : int = prim::Constant[value=15]()
  %r : {BF16} = {REDUCED}(%x, %no, %on, %half, %bf16)
  %s : {BF16} = aten::relu(%r)
  %t : {BF16} = aten::neg(%s)
  return (%t)""")
    (group,) = groups(graph)
    assert compute_kinds(group) == ["aten::relu", "aten::neg"]


# %b is read by the backward of its cast for its dtype only (symbolic_script's
# gradient of _autocast_to_full_precision keeps `self.dtype`).
DTYPE_ONLY = f"""
graph(%x : {BF16}):
  %no : bool = prim::Constant[value=0]()
  %yes : bool = prim::Constant[value=1]()
  %b : {BF16} = aten::mul(%x, %x)
  %f : $T = {FULL}(%b, %no, %yes)
  %o : $T = aten::tanh(%f)
  %d : int = prim::dtype(%b)
  return (%o, %d)"""


def test_output_read_for_its_dtype_only_leaves_the_group() -> None:
    graph = fuse_ir(DTYPE_ONLY)
    (group,) = groups(graph)
    assert len(list(group.outputs())) == 1
    assert compute_kinds(group) == ["aten::mul", FULL, "aten::tanh"]
    branch = group.owningBlock().owningNode()
    assert branch.kind() == "prim::If"
    fused_block, fallback_block = branch.blocks()
    dtype_fused = list(fused_block.outputs())[1]
    assert dtype_fused.node().kind() == "prim::Constant"
    assert dtype_fused.toIValue() == 15  # ScalarType::BFloat16
    dtype_fallback = list(fallback_block.outputs())[1]
    assert dtype_fallback.node().kind() == "prim::dtype"
    assert dtype_fallback.node().input().node().kind() == "prim::FallbackGraph"
    assert "prim::dtype" not in [n.kind() for n in graph.nodes()]
    assert list(graph.outputs())[1] == list(branch.outputs())[1]


def test_dtype_read_of_a_chunked_value_does_not_hold_the_chunk_back() -> None:
    wide = "Float(4, 8, strides=[8, 1], requires_grad=0, device=cpu)"
    half = "Float(4, 4, strides=[8, 1], requires_grad=0, device=cpu)"
    graph = fuse_ir(f"""
graph(%a : {wide}, %b : {wide}):
  %one : int = prim::Constant[value=1]()
  %s : {wide} = aten::add(%a, %b, %one)
  %d : int = prim::dtype(%s)
  %c0 : {half}, %c1 : {half} = prim::ConstantChunk[chunks=2, dim=1](%s)
  %m : {half} = aten::mul(%c0, %c1)
  return (%m, %d)""")
    (group,) = groups(graph)
    assert len(list(group.outputs())) == 1
    assert "aten::add" in compute_kinds(group)
    outside = [n.kind() for n in graph.nodes()]
    assert "prim::ConstantChunk" not in outside and "prim::dtype" not in outside, graph
    branch = group.owningBlock().owningNode()
    assert list(next(branch.blocks()).outputs())[1].toIValue() == 6  # ScalarType::Float


def test_dtype_given_as_an_int_is_pinned_by_the_guard() -> None:
    # The backward of an autocast cast: grad.to(self_dtype), self_dtype from the forward.
    graph = fuse_ir(f"""
graph(%x : $T, %d : int):
  %no : bool = prim::Constant[value=0]()
  %none : NoneType = prim::Constant()
  %a : $T = aten::neg(%x)
  %b : {BF16} = aten::to(%a, %d, %no, %no, %none)
  %c : {BF16} = aten::abs(%b)
  return (%c)""")
    (group,) = groups(graph)
    assert compute_kinds(group) == ["aten::neg", "aten::to", "aten::abs"]
    assert [str(v.type()) for v in group.inputs()] == ["Tensor"]
    (guard,) = graph.findAllNodes("fuser::TypeGuard")
    assert getattr(guard, "is")("ints") == [15]  # ScalarType::BFloat16 (`is` is a keyword)
    assert list(guard.inputs())[-1] == list(graph.inputs())[1]


def test_pinned_dtype_that_changes_runs_the_fallback(fused_min2: None) -> None:
    scripted = script_from_source("""
def f(x, d: int):
    return (x * 2.0).to(d).abs()
""")
    x = torch.randn(4, 5)
    with torch.no_grad():
        for _ in range(3):
            scripted(x, 15)
        graph = torch.jit.last_executed_optimized_graph()
        (group,) = fusion_groups(graph)
        assert "aten::to" in compute_kinds(group), graph
        failures = fuser.stats()["guard_failures"]
        got = scripted(x, 5)  # float16 now: the guard's int check fails
    assert fuser.stats()["guard_failures"] == failures + 1
    assert_same_results(got, (x * 2.0).to(torch.float16).abs())
    assert_same_results(scripted(x, 15), (x * 2.0).to(torch.bfloat16).abs())


def test_op_the_dispatcher_ran_in_another_dtype_is_refused() -> None:
    # Under an outer torch.autocast the dispatcher runs some ops (exp on CUDA) in
    # float32: the profile says so, the op table would compute half. Such a node stays
    # outside, where the dispatcher still handles it.
    half = "Half(4, 5, strides=[5, 1], requires_grad=0, device=cpu)"
    graph = fuse_ir(f"""
graph(%x : {half}):
  %a : {half} = aten::neg(%x)
  %b : {half} = aten::relu(%a)
  %c : $T = aten::exp(%b)
  %d : $T = aten::abs(%c)
  %e : $T = aten::neg(%d)
  return (%e)""")
    assert [compute_kinds(g) for g in groups(graph)] == [
        ["aten::neg", "aten::relu"],
        ["aten::abs", "aten::neg"],
    ]
    assert "aten::exp" in [n.kind() for n in graph.nodes()]


def round_trip_ir(first: str, second: str, source: str) -> str:
    dtypes = {"Float": 6, "Half": 5, "BFloat16": 15, "Double": 7}
    t = {k: f"{k}(4, 5, strides=[5, 1], requires_grad=0, device=cpu)" for k in dtypes}
    return f"""
graph(%x : {t[source]}):
  %no : bool = prim::Constant[value=0]()
  %first : int = prim::Constant[value={dtypes[first]}]()
  %second : int = prim::Constant[value={dtypes[second]}]()
  %a : {t[source]} = aten::neg(%x)
  %b : {t[first]} = aten::to(%a, %first, %no, %no)
  %c : {t[second]} = aten::to(%b, %second, %no, %no)
  %d : {t[second]} = aten::abs(%c)
  return (%d)"""


@pytest.mark.parametrize(
    "source,wide", [("Half", "Float"), ("BFloat16", "Float"), ("Float", "Double")]
)
def test_exact_round_trip_inside_a_group_is_removed(source: str, wide: str) -> None:
    graph = fuse_ir(round_trip_ir(wide, source, source))
    (group,) = groups(graph)
    assert compute_kinds(group) == ["aten::neg", "aten::abs"]


@pytest.mark.parametrize("source,narrow", [("Float", "Half"), ("Float", "BFloat16")])
def test_rounding_round_trip_is_kept(source: str, narrow: str) -> None:
    # float -> half -> float rounds: eager's result is not the input.
    graph = fuse_ir(round_trip_ir(narrow, source, source))
    (group,) = groups(graph)
    assert compute_kinds(group) == ["aten::neg", "aten::to", "aten::to", "aten::abs"]


def test_exact_round_trip_through_autocast_casts_is_removed() -> None:
    # h.float() feeding a product autocast runs in h's dtype: full then reduced.
    graph = fuse_ir(f"""
graph(%x : {BF16}):
  %no : bool = prim::Constant[value=0]()
  %yes : bool = prim::Constant[value=1]()
  %half : int = prim::Constant[value=5]()
  %bf16 : int = prim::Constant[value=15]()
  %a : {BF16} = aten::neg(%x)
  %b : $T = {FULL}(%a, %no, %yes)
  %c : {BF16} = {REDUCED}(%b, %no, %yes, %half, %bf16)
  %d : {BF16} = aten::abs(%c)
  return (%d, %b)""")
    (group,) = groups(graph)
    # %b is still an output (in float32); %d reads the bfloat16 value directly.
    assert compute_kinds(group) == ["aten::neg", FULL, "aten::abs"]


# ---- End to end ----------------------------------------------------------------------


@pytest.mark.parametrize("device,dtype", CASES)
def test_gemm_epilogue_under_autocast_forms_the_same_group(
    fused_min2: None, device: str, dtype: torch.dtype
) -> None:
    args = epilogue_args(device)
    with torch.no_grad():
        plain_graph, _ = optimized_graph(script_from_source(EPILOGUE), args)
        scripted = script_from_source(EPILOGUE)
        with torch.autocast(device, dtype=dtype):
            graph, got = optimized_graph(scripted, args)
            expected = eager(EPILOGUE)(*args)
    (plain,) = fusion_groups(plain_graph)
    (group,) = fusion_groups(graph)
    kinds = compute_kinds(group)
    assert FULL in kinds, graph
    assert without_casts(kinds) == without_casts(compute_kinds(plain))
    assert "aten::gelu" not in [n.kind() for n in all_nodes(graph)]
    assert got.dtype == torch.float32
    assert_same_results(got, expected)


@pytest.mark.parametrize("device,dtype", CASES)
def test_gemm_epilogue_with_autocast_inside_the_function(
    fused_min2: None, device: str, dtype: torch.dtype
) -> None:
    source = EPILOGUE_WITH_INSIDE.format(device=device, dtype=f"torch.{str(dtype).split('.')[-1]}")
    args = epilogue_args(device)
    with torch.no_grad():
        graph, got = optimized_graph(script_from_source(source), args)
        with torch.autocast(device, dtype=dtype):
            expected = eager(EPILOGUE)(*args)
    (group,) = fusion_groups(graph)
    assert FULL in compute_kinds(group), graph
    assert_same_results(got, expected)


@pytest.mark.parametrize("device,dtype", CASES)
def test_lstm_cell_under_autocast_is_one_group(
    fused_min2: None, device: str, dtype: torch.dtype
) -> None:
    args = lstm_args(device)
    with torch.no_grad():
        plain_graph, _ = optimized_graph(script_from_source(LSTM), args)
        with torch.autocast(device, dtype=dtype):
            graph, got = optimized_graph(script_from_source(LSTM), args)
            expected = eager(LSTM)(*args)
            with fuser.enabled(False):
                _, unfused = optimized_graph(script_from_source(LSTM), args)
    (plain,) = fusion_groups(plain_graph)
    (group,) = fusion_groups(graph)
    kinds = compute_kinds(group)
    assert FULL in kinds, graph
    assert without_casts(kinds) == without_casts(compute_kinds(plain))
    assert len(list(group.outputs())) == 2
    assert [t.dtype for t in got] == [torch.float32, torch.float32]
    assert_same_results(got, unfused)
    # Eager rounds the sum of the two products to the autocast dtype before adding the
    # float32 bias; TorchScript's pass adds them in float32.
    assert [t.dtype for t in got] == [t.dtype for t in expected]
    torch.testing.assert_close(got, expected, **LOW_PRECISION[dtype])


@pytest.mark.parametrize("device,dtype", CASES)
def test_activation_chain_keeps_torchscripts_dtypes(
    fused_min2: None, device: str, dtype: torch.dtype
) -> None:
    x, w = torch.randn(16, 32, device=device), torch.randn(32, 24, device=device)
    with torch.no_grad():
        with fuser.enabled(False), torch.autocast(device, dtype=dtype):
            _, expected = optimized_graph(script_from_source(CHAIN), [x, w])
        with torch.autocast(device, dtype=dtype):
            graph, got = optimized_graph(script_from_source(CHAIN), [x, w])
    # The shared cast of the product joins exp to the add's group, and the relu's group
    # reads the same cast: siblings of one shape, merged (partition.cpp), so one group
    # computes all three activations from one read of the product.
    groups = fusion_groups(graph)
    assert len(groups) == 1 and FULL in compute_kinds(groups[0]), graph
    assert len(list(groups[0].outputs())) == 3, graph
    assert not CHAIN_OPS & {n.kind() for n in all_nodes(graph)}, graph
    assert_same_results(got, expected)


@pytest.mark.parametrize("device,dtype", CASES)
def test_activation_chain_with_the_jit_pass_off_has_eager_dtypes(
    fused_min2: None, jit_autocast_off: None, device: str, dtype: torch.dtype
) -> None:
    # No casts in the graph: the dispatcher autocasts the matmul, and the groups read
    # its reduced result as eager's elementwise ops do.
    x, w = torch.randn(16, 32, device=device), torch.randn(32, 24, device=device)
    with torch.no_grad(), torch.autocast(device, dtype=dtype):
        graph, got = optimized_graph(script_from_source(CHAIN), [x, w])
        expected = eager(CHAIN)(x, w)
    groups = fusion_groups(graph)
    assert groups and not {k for g in groups for k in compute_kinds(g)} & set(CASTS)
    # On CUDA the dispatcher computes exp in float32: exp stays unfused there (see
    # test_op_the_dispatcher_ran_in_another_dtype_is_refused); on CPU all three are in
    # the autocast dtype.
    if device == "cpu":
        assert [t.dtype for t in got] == [dtype] * 3
    assert_same_results(got, expected)


def scaled_step(fn: Any, args: list[torch.Tensor], device: str, dtype: torch.dtype) -> Any:
    """One GradScaler-style step: the scaled loss's backward, gradients unscaled."""
    scale = 1024.0
    with torch.autocast(device, dtype=dtype):
        out = fn(*args)
    loss = sum(o.float().sum() for o in as_tuple(out)) * scale
    loss.backward()
    grads = [a.grad / scale for a in args]
    for a in args:
        a.grad = None
    return out, grads


# name -> (source, arguments, forward groups, whether the backward has a fusible chain),
# forward groups as without autocast: the dtypes autodiff keeps for the casts' backward
# do not hold the LSTM's chunk back (chunks.cpp) nor stay group outputs (guard.cpp). The
# epilogue's backward is gelu_backward between single multiplications: no group, with
# or without autocast.
TRAINING = {"epilogue": (EPILOGUE, epilogue_args, 1, False), "lstm": (LSTM, lstm_args, 1, True)}


@pytest.mark.parametrize("device,dtype", CASES)
@pytest.mark.parametrize("name", sorted(TRAINING))
def test_training_under_autocast_fuses_forward_and_backward(
    fused_min2: None, name: str, device: str, dtype: torch.dtype
) -> None:
    source, make_args, forward_groups, backward_fuses = TRAINING[name]
    scripted = script_from_source(source)
    args = make_args(device, grad=True)
    for _ in range(4):  # the forward and backward graphs have executors of their own
        scaled_step(scripted, args, device, dtype)
    launches = fuser.stats()["kernel_launches"]
    with torch.autocast(device, dtype=dtype):
        out = scripted(*args)
    # The autodiff forward's graph is not shown by last_executed_optimized_graph: its
    # kernel launches count its groups.
    assert fuser.stats()["kernel_launches"] == launches + forward_groups
    sum(o.float().sum() for o in as_tuple(out)).backward()
    if backward_fuses:
        assert fuser.stats()["kernel_launches"] > launches + forward_groups
        if device == "cpu":  # the backward's graph is recorded on the thread that ran it
            assert fusion_groups(torch.jit.last_executed_optimized_graph())
    for a in args:
        a.grad = None

    got_out, got_grads = scaled_step(scripted, args, device, dtype)
    reference = [a.detach().clone().requires_grad_() for a in args]
    expected_out, expected_grads = scaled_step(eager(source), reference, device, dtype)
    with fuser.enabled(False):
        unfused = script_from_source(source)
        for _ in range(4):
            scaled_step(unfused, reference, device, dtype)
        unfused_out, unfused_grads = scaled_step(unfused, reference, device, dtype)
    assert_same_results(got_out, unfused_out)
    assert [g.dtype for g in got_grads] == [e.dtype for e in expected_grads]
    # Float gradients rounded to the autocast dtype for the backward's matmuls: a float
    # result one unit in the last place off ATen's (contracted multiply-adds) can round
    # to the neighbouring half-precision value, and the product carries that on.
    torch.testing.assert_close(got_grads, unfused_grads, **LOW_PRECISION[dtype])
    torch.testing.assert_close(got_out, expected_out, **LOW_PRECISION[dtype])
    torch.testing.assert_close(got_grads, expected_grads, **LOW_PRECISION[dtype])
