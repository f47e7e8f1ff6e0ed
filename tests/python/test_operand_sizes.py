"""A fusible op that reads the size of an elementwise result (`layer_norm(y,
[y.size(-1)])`, `expand(y.size())`) reads it from the result's operands
(csrc/passes/operand_sizes.cpp), so the op making `y` joins the group: values, shapes,
strides and errors as eager's, for shapes that broadcast and calls whose shapes change."""

from __future__ import annotations

import pytest
import torch
from test_reductions import compare

from helpers import FUSION_GROUP, all_nodes, devices, script_from_source

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
