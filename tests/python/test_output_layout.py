"""Every fused output has eager's shape, dtype, strides and values, whatever the group's
iteration shape: runtime/output_layout.cpp (each output's layout), the partition's rule
that a group's outputs share one profiled shape (passes/fusibility.cpp), and the
executor's per-call check behind it (runtime/fusion_executor.cpp)."""

from __future__ import annotations

import random

import pytest
import torch

import fuser
from helpers import (
    FUSION_GROUP,
    all_nodes,
    devices,
    eager_from_source,
    fusion_group_function,
    run_optimized,
    script_from_source,
)


def assert_same_as_eager(source: str, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
    fused = run_optimized(script_from_source(source), *args)
    expected = eager_from_source(source)(*args)
    fused = fused if isinstance(fused, tuple) else (fused,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(fused) == len(expected)
    for got, want in zip(fused, expected, strict=True):
        assert got.shape == want.shape, source
        assert got.dtype == want.dtype, source
        assert got.device == want.device, source
        assert got.stride() == want.stride(), (source, got.stride(), want.stride())
        torch.testing.assert_close(got, want, equal_nan=True)
    return fused


def matrix(layout: str, device: str) -> torch.Tensor:
    """A 4 x 6 input, row-major or the transpose of a row-major 6 x 4."""
    if layout == "transposed":
        return torch.randn(6, 4, device=device).t()
    return torch.randn(4, 6, device=device)


def test_issue_repro_outputs_keep_their_own_shapes() -> None:
    source = "def f(a, b):\n    t = a.exp()\n    return t, t - b\n"
    with fuser.enabled(True):
        t, d = assert_same_as_eager(source, torch.randn(7), torch.randn(5, 7))
    assert t.shape == (7,) and d.shape == (5, 7)


CASES = {
    # an output computed from a subset of the inputs, smaller than the group's shape
    "broadcast_smaller": ("def f(a, b):\n    t = a.exp()\n    return t, t - b\n", [(7,), (5, 7)]),
    "size_one_dim": ("def f(a, b):\n    t = a.sigmoid()\n    return t, t * b\n", [(5, 1), (5, 7)]),
    "zero_dim_output": ("def f(a, b):\n    t = a.relu()\n    return t, t + b\n", [(), (3, 4)]),
    "zero_size": ("def f(a, b):\n    t = (a * b).exp()\n    return t, t + 1.0\n", [(0, 4), (4,)]),
    "same_shapes": ("def f(a, b):\n    t = (a * b).exp()\n    return t, t + a\n", [(3, 4), (3, 4)]),
    # the other tensor of type_as gives a dtype only: its shape takes no part
    "type_as_larger_other": (
        "def f(a, b):\n    return (a.type_as(b) * 2.0).exp()\n",
        [(3,), (5, 6)],
    ),
}


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("name", sorted(CASES))
def test_output_shapes_match_eager(fused, name: str, device: str) -> None:
    source, shapes = CASES[name]
    args = [torch.randn(s, device=device) for s in shapes]
    if name == "type_as_larger_other":
        args[1] = args[1].double()
    assert_same_as_eager(source, *args)


def test_type_as_other_that_does_not_broadcast_is_not_an_error(fused) -> None:
    # Eager never broadcasts type_as's operands; the kernel must not either.
    assert_same_as_eager(
        "def f(a, b):\n    return (a.type_as(b) + 1.0).relu()\n",
        torch.randn(3),
        torch.randn(5, dtype=torch.float64),
    )


LAYOUT_CASES = {
    "transposed_first": "def f(x, y):\n    return (x.t() * y + 1.0).relu()\n",
    "transposed_second": "def f(x, y):\n    return (y * x.t() + 1.0).relu()\n",
    "two_layouts": "def f(x, y):\n    return x.t().exp(), (y * 2.0).sigmoid() + x.t()\n",
}


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("name", sorted(LAYOUT_CASES))
def test_output_strides_match_eager(fused, name: str, device: str) -> None:
    x, y = torch.randn(40, 24, device=device), torch.randn(24, 40, device=device)
    assert_same_as_eager(LAYOUT_CASES[name], x, y)


@pytest.mark.parametrize("device", devices())
def test_channels_last_stays_channels_last(fused, device: str) -> None:
    x = torch.randn(2, 8, 5, 6, device=device).to(memory_format=torch.channels_last)
    bias = torch.randn(8, 1, 1, device=device)
    for source in (
        "def f(x, b):\n    return (x + b).relu() * 2.0\n",
        "def f(x, b):\n    return (b + x).relu() * 2.0\n",
        "def f(x, r):\n    return (x * 0.5 + r).relu()\n",
    ):
        residual = x.clone() if "r)" in source else bias
        (out,) = assert_same_as_eager(source, x, residual)
        assert out.is_contiguous(memory_format=torch.channels_last)


def test_partition_keeps_differently_shaped_results_out_of_the_group() -> None:
    fn = script_from_source(
        "def f(a, b):\n    t = a.exp()\n    u = t - b\n    return t, u.relu()\n"
    )
    with fuser.enabled(True):
        run_optimized(fn, torch.randn(7), torch.randn(5, 7))
        graph = fn.graph_for(torch.randn(7), torch.randn(5, 7))
    (group,) = graph.findAllNodes(FUSION_GROUP, recurse=True)
    kinds = [n.kind() for n in group.g("Subgraph").nodes() if n.kind() != "prim::Constant"]
    assert kinds == ["aten::sub", "aten::relu"]
    assert fuser.stats()["layout_fallbacks"] == 0


def test_runtime_falls_back_when_sizes_make_outputs_differ() -> None:
    # The group was formed for equal shapes; a later call broadcasts one output.
    fn = fusion_group_function(
        """
        graph(%a : Float(5, 7, strides=[7, 1], requires_grad=0, device=cpu),
              %b : Float(5, 7, strides=[7, 1], requires_grad=0, device=cpu)):
          %t : Float(5, 7, strides=[7, 1], requires_grad=0, device=cpu) = aten::exp(%a)
          %one : int = prim::Constant[value=1]()
          %u : Float(5, 7, strides=[7, 1], requires_grad=0, device=cpu) = aten::sub(%t, %b, %one)
          return (%t, %u)
        """
    )
    a, b = torch.randn(5, 7), torch.randn(5, 7)
    t, u = fn(a, b)
    torch.testing.assert_close(u, a.exp() - b)
    assert fuser.stats()["layout_fallbacks"] == 0
    a = torch.randn(1, 7)
    t, u = fn(a, b)
    assert t.shape == (1, 7) and u.shape == (5, 7)
    torch.testing.assert_close(t, a.exp())
    torch.testing.assert_close(u, a.exp() - b)
    assert fuser.stats()["layout_fallbacks"] == 1


# ---- seeded random programs ------------------------------------------------------

UNARY = ["exp", "relu", "sigmoid", "neg", "tanh", "abs"]
BINARY = ["+", "-", "*", "torch.maximum"]


def random_shape(rng: random.Random, base: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to `base`: a suffix of it, some dims set to 1."""
    rank = rng.randint(0, len(base))
    shape = list(base[len(base) - rank :])
    for d in range(rank):
        if rng.random() < 0.3:
            shape[d] = 1
    return tuple(shape)


def random_tensor(rng: random.Random, shape: tuple[int, ...], device: str) -> torch.Tensor:
    t = torch.randn(shape, device=device)
    kind = rng.choice(["contiguous", "permuted", "channels_last", "sliced"])
    if kind == "permuted" and len(shape) >= 2:
        perm = list(range(len(shape)))
        rng.shuffle(perm)
        inverse = [perm.index(d) for d in range(len(shape))]
        return t.permute(perm).contiguous().permute(inverse)
    if kind == "channels_last" and len(shape) == 4:
        return t.contiguous(memory_format=torch.channels_last)
    if kind == "sliced" and len(shape) >= 1 and shape[-1] > 1:
        wide = torch.randn(*shape[:-1], 2 * shape[-1], device=device)
        return wide[..., ::2]
    return t


def random_program(rng: random.Random) -> tuple[str, int]:
    """A TorchScript source with a few inputs, elementwise steps over earlier values and
    scalars, and some of the values (not only the last) returned."""
    num_inputs = rng.randint(1, 4)
    values = [f"x{i}" for i in range(num_inputs)]
    lines = []
    for step in range(rng.randint(2, 7)):
        name = f"v{step}"
        if rng.random() < 0.4:
            expr = f"torch.{rng.choice(UNARY)}({rng.choice(values)})"
        else:
            a, b = rng.choice(values), rng.choice(values + ["1.5", "0.5"])
            op = rng.choice(BINARY)
            if op.startswith("torch."):
                b = b if b.startswith(("x", "v")) else a
                expr = f"{op}({a}, {b})"
            else:
                expr = f"{a} {op} {b}"
        lines.append(f"    {name} = {expr}")
        values.append(name)
    computed = values[num_inputs:]
    returned = sorted(set(rng.sample(computed, rng.randint(1, min(3, len(computed))))))
    if computed[-1] not in returned:
        returned.append(computed[-1])
    signature = ", ".join(values[:num_inputs])
    body = "\n".join(lines)
    source = f"def f({signature}):\n{body}\n    return ({', '.join(returned)},)\n"
    return source, num_inputs


@pytest.mark.parametrize("device", devices())
def test_random_programs_match_eager(fused, device: str) -> None:
    rng = random.Random(20261124)
    checked = 0
    for _ in range(30):
        source, num_inputs = random_program(rng)
        base = rng.choice([(3, 4, 5), (2, 3, 4, 5), (6, 7)])
        args = [random_tensor(rng, random_shape(rng, base), device) for _ in range(num_inputs)]
        assert_same_as_eager(source, *args)
        checked += 1
    assert checked == 30
    assert fuser.stats()["groups_formed"] > 0
    assert fuser.stats()["kernel_launches"] > 0


def _expanded(dtype: torch.dtype, device: str) -> torch.Tensor:
    """A [2, 3, 4, 5] of `dtype` expanded along its last dim: strides (12, 4, 1, 0)."""
    return (torch.rand(2, 3, 4, 1, device=device) * 5).to(dtype).expand(2, 3, 4, 5)


def _transposed(device: str) -> torch.Tensor:
    """A float32 [2, 3, 4, 5] of strides (60, 20, 1, 4)."""
    return torch.randn(2, 3, 5, 4, device=device).transpose(2, 3)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize(
    "source, make",
    [
        # CPU TensorIterator copies an operand of another dtype than the common one (a
        # dense copy of the expanded int64 or bfloat16) before it orders the dims.
        (
            "def f(a, b):\n    return a / b - b\n",
            lambda d: (_expanded(torch.int64, d), _transposed(d)),
        ),
        (
            "def f(a, b):\n    v = a + b\n    return v - v\n",
            lambda d: (_expanded(torch.bfloat16, d), _transposed(d)),
        ),
        (
            "def f(a, b):\n    return (a * 2.5).exp(), a < b\n",
            lambda d: (_expanded(torch.int32, d), _transposed(d)),
        ),
        (
            "def f(a, b):\n    return torch.where(a > 0.5, a, b)\n",
            lambda d: (_expanded(torch.float64, d), _transposed(d)),
        ),
        # The float16 operand is copied (dense already: channels-last), the float32 expanded
        # one is not, and leaves its broadcast dim to the copy.
        (
            "def f(a, b):\n    return (b == a).float()\n",
            lambda d: (
                torch.randn(8, 3, 1, 5, device=d)
                .half()
                .contiguous(memory_format=torch.channels_last),
                torch.randn(8, 3, 1, 1, device=d).expand(8, 3, 1, 5),
            ),
        ),
        # Same dtypes: no copy, the transposed operand leads (the expanded one is broadcast).
        (
            "def f(a, b):\n    return a / b - b\n",
            lambda d: (_expanded(torch.float32, d), _transposed(d)),
        ),
    ],
)
def test_operands_cast_to_the_common_dtype_lay_out_as_eager(fused, source, make, device) -> None:
    assert_same_as_eager(source, *make(device))
    assert fuser.stats()["groups_formed"] > 0


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize(
    "make",
    [
        # [2, 3, 0, 4] channels-last: strides (0, 1, 12, 3); eager's results keep them.
        lambda d: torch.randn(2, 3, 0, 4, device=d).contiguous(memory_format=torch.channels_last),
        # [0, 4] of strides (1, 1): eager's batch_norm gives (4, 1), its add (1, 0).
        lambda d: torch.randn(4, 0, device=d).t(),
    ],
)
def test_empty_outputs_keep_eagers_strides(fused, device, make) -> None:
    # Calls over empty tensors run interpreted: eager's own strides, whatever its rules.
    x = make(device)
    w, b = torch.randn(x.shape[1], device=device), torch.randn(x.shape[1], device=device)
    assert_same_as_eager("def f(x):\n    return (x > -1.0).to(torch.float16)\n", x)
    assert_same_as_eager(
        "def f(x, w, b):\n"
        "    v = torch.nn.functional.batch_norm(x, w, b, None, None, False, 0.1, 1e-5)\n"
        "    return v, torch.nn.functional.silu(v), v + b.expand(x.shape[1])[0]\n",
        x,
        w,
        b,
    )


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize(
    "conversion",
    ["x.float()", "x.to(torch.float32)", "x.type_as(y)", "x.to(y)"],
)
def test_a_conversion_that_keeps_the_dtype_returns_its_input(fused, device, conversion) -> None:
    # Eager answers a conversion to the tensor's own dtype with the tensor itself: the
    # same memory and strides (a slice's (12, 6, 2) here), not a dense copy.
    source = (
        f"def f(x, y):\n    v = {conversion}\n    return v, torch.log_softmax(v - 1.0, -2) * y\n"
    )
    x = torch.randn(1, 2, 6, device=device)[..., ::2]
    y = torch.randn(1, 2, 3, device=device)
    fn = script_from_source(source)  # kept alive: the optimized graph is read below
    got = run_optimized(fn, x, y)
    want = eager_from_source(source)(x, y)
    for g, w in zip(got, want, strict=True):
        assert (g.shape, g.dtype, g.stride()) == (w.shape, w.dtype, w.stride())
        torch.testing.assert_close(g, w)
    assert got[0].data_ptr() == x.data_ptr()
    graph = torch.jit.last_executed_optimized_graph()
    groups = [n for n in all_nodes(graph) if n.kind() == FUSION_GROUP]
    assert groups
    for group in groups:  # none writes a copy of x
        returned = [v.node().kind() for v in group.g("Subgraph").outputs()]
        assert "aten::to" not in returned and "aten::type_as" not in returned


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("conversion", ["t.float()", "t.to(torch.float32)", "t.type_as(y)"])
def test_a_conversion_that_keeps_the_dtype_of_an_output_is_that_output(
    fused, device, conversion
) -> None:
    # Eager's `t, t.float()` are one tensor: a write to one is seen in the other.
    source = f"def f(x, y):\n    t = x * y\n    return t, {conversion}, (t - 1.0).exp()\n"
    x = torch.randn(4, 6, device=device).t()
    y = torch.randn(6, 1, device=device)
    got = assert_same_as_eager(source, x, y)
    want = eager_from_source(source)(x, y)
    assert want[1] is want[0]
    assert got[1].data_ptr() == got[0].data_ptr()
    got[0].add_(1.0)
    torch.testing.assert_close(got[1], want[0] + 1.0)
    assert fuser.stats()["groups_formed"] >= 1


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("of", ["t", "x"])
@pytest.mark.parametrize("layout", ["row-major", "transposed"])
def test_contiguous_of_a_returned_value_is_that_value_where_eager_s_is(
    fused, device, of, layout
) -> None:
    # Eager's v.contiguous() is v itself where v is row-major, else a copy: returned
    # beside v (a group output t, or the group input x), it shares v's memory or not
    # as eager's does, and has eager's strides.
    source = f"def f(x, y):\n    t = x * y\n    return t, {of}.contiguous(), (t - 1.0).exp()\n"
    x = matrix(layout, device)
    y = torch.randn(4, 6, device=device)
    got = assert_same_as_eager(source, x, y)
    want = eager_from_source(source)(x, y)
    v_got, v_want = (got[0], want[0]) if of == "t" else (x, x)
    shares = want[1].data_ptr() == v_want.data_ptr()
    assert shares == (layout == "row-major")
    assert (got[1].data_ptr() == v_got.data_ptr()) == shares
    assert fuser.stats()["groups_formed"] >= 1


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize(
    "body", ["x.to(torch.float16)", "x.type_as(y)", "x.contiguous()", "x.half(), x.contiguous()"]
)
def test_a_group_of_conversions_alone_returns_its_input(fused, device, body) -> None:
    # Single ops form groups here (the `fused` fixture keeps them): a group whose outputs
    # are all such conversions of its input computes nothing, and is left to ATen, which
    # answers x itself (an expanded x keeps its zero stride) or, for contiguous, a copy
    # where x is not row-major, as eager does.
    source = f"def f(x, y):\n    return ({body},)\n"
    x = torch.randn(1, device=device).half().expand(5)
    y = torch.randn(3, device=device).half()
    got = assert_same_as_eager(source, x, y)
    want = eager_from_source(source)(x, y)
    for g, w in zip(got, want, strict=True):
        assert (g.data_ptr() == x.data_ptr()) == (w.data_ptr() == x.data_ptr())
    assert got[0].data_ptr() == x.data_ptr() or body == "x.contiguous()"


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("layout", ["row-major", "transposed"])
@pytest.mark.parametrize("second", ["v.contiguous()", "v.float()"])
def test_a_chain_of_such_outputs_aliases_along_as_eager_s(fused, device, layout, second) -> None:
    # Eager's v = x.contiguous() is x or a copy, and v.contiguous() (or v.float()) is v:
    # a write to one is seen in the other, whichever the group hands out first (found by
    # tools/fuzz_dtypes.py: the group wrote the second as a copy of its own).
    source = f"def f(x):\n    v = x.contiguous()\n    return x * 2.0, v, {second}\n"
    x = matrix(layout, device)
    got, want = assert_same_as_eager(source, x), eager_from_source(source)(x)
    assert (got[1].data_ptr() == x.data_ptr()) == (want[1].data_ptr() == x.data_ptr())
    assert want[2].data_ptr() == want[1].data_ptr()
    assert got[2].data_ptr() == got[1].data_ptr()
    assert fuser.stats()["groups_formed"] >= 1


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("layout", ["row-major", "transposed"])
@pytest.mark.parametrize("link", ["contiguous()", "float()"])
def test_a_chain_through_a_value_not_returned_aliases_as_eager_s(
    fused, device, layout, link
) -> None:
    # v = x.float() (or x.contiguous()) is not returned, v.float() is: eager's is x
    # itself where the links alias (found by tools/fuzz_dtypes.py: a copy of its own).
    source = f"def f(x):\n    v = x.{link}\n    return x * 2.0, v.{link}, v + 1.0\n"
    x = matrix(layout, device)
    got, want = assert_same_as_eager(source, x), eager_from_source(source)(x)
    assert (got[1].data_ptr() == x.data_ptr()) == (want[1].data_ptr() == x.data_ptr())
    assert want[1].data_ptr() == x.data_ptr() or link == "contiguous()"


def test_a_conversion_that_keeps_the_dtype_converts_after_a_guard_failure(fused) -> None:
    # The guard fixes the dtypes: with a float64 x the fallback converts, as eager does.
    source = "def f(x, y):\n    v = x.float()\n    return v, (v - 1.0).exp() * y\n"
    fn = script_from_source(source)
    x, y = torch.randn(2, 6)[:, ::2], torch.randn(2, 3)
    run_optimized(fn, x, y)
    for _ in range(3):
        got = fn(x.double(), y)
        assert got[0].dtype == torch.float32
        torch.testing.assert_close(got[0], x)
