"""A fusible op that reads the size of an elementwise result (`layer_norm(y,
[y.size(-1)])`, `y * (1.0 / y.size(-1))`) reads it from the result's operands
(csrc/passes/operand_sizes.cpp), so the op making `y` joins the group: values, shapes,
strides and errors as eager's, for shapes that broadcast and calls whose shapes change."""

from __future__ import annotations

import pytest
import torch
from test_reductions import compare

from helpers import (
    FUSION_GROUP,
    all_nodes,
    devices,
    eager_from_source,
    run_optimized,
    script_from_source,
)

LAYER_NORM_OF_SUM = (
    "def f(x, r, w, b):\n"
    "    y = x + r\n"
    "    return torch.nn.functional.layer_norm(y, [y.size(-1)], w, b, 1e-5)\n"
)
LAYER_NORM_OF_CHAIN = (
    "def f(x, r, w, b):\n"
    "    y = torch.relu(x * 2.0 + r).sigmoid()\n"
    "    return torch.nn.functional.layer_norm(y, y.shape[-1:], w, b, 1e-5)\n"
)


def kinds_beside(fn: object, kind: str, *args: torch.Tensor) -> set[str]:
    """The node kinds of the one group that computes `kind`."""
    graph = fn.graph_for(*args)  # type: ignore[attr-defined]
    found = [
        {n.kind() for n in node.g("Subgraph").nodes()}
        for node in all_nodes(graph)
        if node.kind() == FUSION_GROUP and any(n.kind() == kind for n in node.g("Subgraph").nodes())
    ]
    assert len(found) == 1, found
    return found[0]


SOFTMAX_BESIDE_SIZE = (
    "def f(x, r, w, b):\n"
    "    y = x - r\n"
    "    n = y.size(-1)\n"
    "    return torch.softmax(y * (1.0 / n), -1) + b\n"
)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("text", [LAYER_NORM_OF_SUM, LAYER_NORM_OF_CHAIN], ids=["sum", "chain"])
def test_the_op_making_a_normalized_value_joins_its_group(fused, device, text) -> None:
    x = torch.randn(6, 10, 32, device=device)
    r = torch.randn(6, 10, 32, device=device)
    w, b = torch.randn(32, device=device), torch.randn(32, device=device)
    fn = compare(text, x, r, w, b)
    kinds = kinds_beside(fn, "aten::layer_norm", x, r, w, b)
    assert "aten::add" in kinds, kinds


@pytest.mark.parametrize("device", devices())
def test_sizes_of_broadcasting_operands(fused, device) -> None:
    w, b = torch.randn(32, device=device), torch.randn(32, device=device)
    # r broadcasts against x along its leading dims, then the other way round.
    compare(
        LAYER_NORM_OF_SUM,
        torch.randn(10, 32, device=device),
        torch.randn(6, 10, 32, device=device),
        w,
        b,
    )
    compare(
        LAYER_NORM_OF_CHAIN,
        torch.randn(6, 1, 32, device=device),
        torch.randn(10, 1, device=device),
        w,
        b,
    )


@pytest.mark.parametrize("device", devices())
def test_later_calls_of_other_shapes_read_their_own_sizes(fused, device) -> None:
    fn = script_from_source(LAYER_NORM_OF_SUM)
    for shape, width in [((6, 10, 32), 32), ((6, 10, 32), 32), ((4, 16), 16), ((3, 5, 7, 8), 8)]:
        x, r = torch.randn(shape, device=device), torch.randn(shape, device=device)
        w, b = torch.randn(width, device=device), torch.randn(width, device=device)
        want = torch.nn.functional.layer_norm(x + r, [width], w, b, 1e-5)
        got = fn(x, r, w, b)
        assert got.shape == want.shape and got.stride() == want.stride()
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # The size's last dim from r alone: x of width 1 broadcasts to r's 8.
    x, r = torch.randn(3, 1, device=device), torch.randn(3, 8, device=device)
    w, b = torch.randn(8, device=device), torch.randn(8, device=device)
    torch.testing.assert_close(fn(x, r, w, b), torch.nn.functional.layer_norm(x + r, [8], w, b))


@pytest.mark.parametrize("device", devices())
def test_operands_that_do_not_broadcast_raise_eagers_error(fused, device) -> None:
    fn = script_from_source(LAYER_NORM_OF_SUM)
    w, b = torch.randn(32, device=device), torch.randn(32, device=device)
    for _ in range(3):
        fn(torch.randn(4, 32, device=device), torch.randn(4, 32, device=device), w, b)
    x, r = torch.randn(4, 32, device=device), torch.randn(5, 32, device=device)
    with pytest.raises(RuntimeError) as eager:
        torch.nn.functional.layer_norm(x + r, [32], w, b)
    with pytest.raises(RuntimeError) as scripted:
        fn(x, r, w, b)
    assert "must match the size of tensor b (5) at non-singleton dimension 0" in str(eager.value)
    assert "must match the size of tensor b (5) at non-singleton dimension 0" in str(scripted.value)


@pytest.mark.parametrize("device", devices())
def test_a_size_read_as_a_number_beside_a_softmax(fused, device) -> None:
    x, r = torch.randn(8, 48, device=device), torch.randn(8, 48, device=device)
    b = torch.randn(48, device=device)
    fn = compare(SOFTMAX_BESIDE_SIZE, x, r, b, b)
    assert "aten::sub" in kinds_beside(fn, "aten::softmax", x, r, b, b)


@pytest.mark.parametrize("device", devices())
def test_a_dim_out_of_range_raises_as_aten_size(fused, device) -> None:
    text = "def f(x, r):\n    y = x + r\n    return y * y.size(2)\n"
    fn = script_from_source(text)
    for _ in range(3):
        fn(torch.randn(2, 4, 8, device=device), torch.randn(2, 4, 8, device=device))
    x = torch.randn(4, 8, device=device)
    with pytest.raises(RuntimeError, match=r"Dimension out of range \(expected to be in range"):
        fn(x, x)
    zero_dim = script_from_source("def f(x, r):\n    y = x + r\n    return y * y.size(-1)\n")
    for _ in range(3):
        zero_dim(x, x)
    with pytest.raises(RuntimeError, match="Dimension specified as -1 but tensor has no dim"):
        zero_dim(torch.tensor(1.0, device=device), torch.tensor(2.0, device=device))


@pytest.mark.parametrize("device", devices())
def test_values_written_in_place_keep_their_own_size(fused, device) -> None:
    # An in-place write between the op and the size read changes the size, not the
    # operands': those sizes stay the value's own.
    unsqueezed = "def f(x, r):\n    y = x + r\n    x.unsqueeze_(0)\n    return y * y.size(0)\n"
    transposed = (
        "def f(x, r):\n    y = x + r\n    y.t_()\n"
        "    return torch.nn.functional.layer_norm(y, [y.size(-1)])\n"
    )
    for text in (unsqueezed, transposed):
        fn = script_from_source(text)
        for _ in range(4):
            x, r = torch.ones(4, 8, device=device), torch.zeros(4, 8, device=device)
            got = fn(x, r)
            x, r = torch.ones(4, 8, device=device), torch.zeros(4, 8, device=device)
            want = eager_from_source(text)(x, r)
            assert got.shape == want.shape
            torch.testing.assert_close(got, want)


@pytest.mark.parametrize("device", devices())
def test_the_size_of_a_conversion_to_anothers_dtype_is_its_own(fused, device) -> None:
    # to(other) takes other's dtype only: the size is self's (build of shape expressions,
    # passes/shapes.cpp, once broadcast the two).
    text = "def f(x, o, w):\n    y = x.to(o)\n    return y * w, y.size()\n"
    x, w = torch.randn(3, 8, device=device), torch.randn(8, device=device)
    o = torch.randn(5, 2, device=device, dtype=torch.float16)
    fn = script_from_source(text)
    got = run_optimized(fn, x, o, w)
    want = eager_from_source(text)(x, o, w)
    torch.testing.assert_close(got[0], want[0])
    assert list(got[1]) == list(want[1])
