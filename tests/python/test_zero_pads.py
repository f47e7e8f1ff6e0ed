"""A constant pad that pads nothing hands back its input where nobody could tell it from
ATen's copy (passes/zero_pads.cpp, runtime/zero_pad_op.cpp): values and strides as
TorchScript's own; a copy still where the pad pads, where the input's elements are not
dense, and where the result or the input is written or leaves the graph."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import fuser
from helpers import count_kind, devices, run_optimized, script_from_source, torchscript_alone

ALIASED = "fuser::pad_unless_zero"

# Swin's pad to a multiple of the window, read by a product.
PADDED_THEN_READ = """
def f(x, w, r: int, b: int):
    y = torch.nn.functional.pad(x, (0, 0, 0, r, 0, b))
    return torch.matmul(y, w)
"""

PADDED_ND_THEN_READ = """
def f(x, w, r: int):
    y = torch.constant_pad_nd(x, [0, 0, 0, r], 0.0)
    return torch.matmul(y, w)
"""

PADDED_RETURNED = """
def f(x, r: int):
    return torch.nn.functional.pad(x, (0, r))
"""

INPUT_WRITTEN_AFTER = """
def f(x, w, r: int):
    y = torch.nn.functional.pad(x, (0, 0, 0, r))
    x.add_(1.0)
    return torch.matmul(y, w)
"""

RESULT_WRITTEN = """
def f(x, w, r: int):
    y = torch.nn.functional.pad(x, (0, 0, 0, r))
    y.mul_(2.0)
    return torch.matmul(y, w) + torch.matmul(x, w)
"""


def both(source: str, *args: Any) -> tuple[Any, Any, Any]:
    reference = script_from_source(source)
    fused = script_from_source(source)
    with torchscript_alone():
        want = run_optimized(reference, *[a.clone() if torch.is_tensor(a) else a for a in args])
    with fuser.enabled(True):
        got = run_optimized(fused, *args)
        graph = torch.jit.last_executed_optimized_graph()
    return want, got, graph


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("pads", [(0, 0), (1, 0), (0, 2), (2, 3)])
def test_pads_of_zero_alias_and_others_pad(device: str, pads: tuple[int, int]) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 7, 7, 8, device=device)
    w = torch.randn(8, 5, device=device)
    with torch.no_grad():
        want, got, graph = both(PADDED_THEN_READ, x, w, *pads)
    assert count_kind(graph, ALIASED) == 1 and count_kind(graph, "aten::pad") == 0
    assert got.shape == want.shape and got.stride() == want.stride()
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    with torch.no_grad():
        want, got, graph = both(PADDED_ND_THEN_READ, x, w, pads[0])
    assert count_kind(graph, ALIASED) == 1
    torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("device", devices())
def test_the_alias_is_the_input_itself_where_the_copy_would_keep_its_strides(device: str) -> None:
    # Reach the operator directly: the pad's result is internal to a graph otherwise.
    dense = torch.randn(2, 3, 4, 5, device=device).to(memory_format=torch.channels_last)
    got = torch.ops.fuser.pad_unless_zero(dense, [0, 0, 0, 0], "constant", None)
    assert got.data_ptr() == dense.data_ptr() and got.stride() == dense.stride()
    sparse_rows = torch.randn(6, 8, device=device)[::2, ::2]
    got = torch.ops.fuser.pad_unless_zero(sparse_rows, [0, 0], "constant", None)
    want = torch.nn.functional.pad(sparse_rows, (0, 0))
    assert got.data_ptr() != sparse_rows.data_ptr() and got.stride() == want.stride()
    assert torch.equal(got, want)
    padded = torch.ops.fuser.pad_unless_zero.nd(dense, [1, 0], 2.5)
    assert torch.equal(padded, torch.constant_pad_nd(dense, [1, 0], 2.5))
    with pytest.raises(RuntimeError, match="divisible by 2"):
        torch.ops.fuser.pad_unless_zero(dense, [0, 0, 0], "constant", None)
    grad_input = torch.randn(3, 4, device=device, requires_grad=True)
    copied = torch.ops.fuser.pad_unless_zero(grad_input, [0, 0], "constant", None)
    assert copied.data_ptr() != grad_input.data_ptr() and copied.requires_grad


@pytest.mark.parametrize("device", devices())
def test_copies_that_someone_could_tell_apart_stay(device: str) -> None:
    torch.manual_seed(0)
    x = torch.randn(4, 8, device=device)
    w = torch.randn(8, 3, device=device)
    with torch.no_grad():
        want, got, graph = both(PADDED_RETURNED, x, 0)
        assert count_kind(graph, ALIASED) == 0
        assert got.data_ptr() != x.data_ptr()
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        for source in (INPUT_WRITTEN_AFTER, RESULT_WRITTEN):
            x_want, x_got = x.clone(), x.clone()
            reference = script_from_source(source)
            fused = script_from_source(source)
            with torchscript_alone():
                want = [reference(x_want, w, 0) for _ in range(3)][-1]
            with fuser.enabled(True):
                got = [fused(x_got, w, 0) for _ in range(3)][-1]
                graph = torch.jit.last_executed_optimized_graph()
            assert count_kind(graph, ALIASED) == 0
            torch.testing.assert_close(got, want, rtol=0, atol=0)
            torch.testing.assert_close(x_got, x_want, rtol=0, atol=0)


TRAINED = """
def f(x, w):
    y = torch.nn.functional.pad(x, (0, 0, 0, 0))
    return torch.matmul(y, w).sum()
"""


@pytest.mark.parametrize("device", devices())
def test_gradients_through_a_pad_of_zero(device: str) -> None:
    torch.manual_seed(0)
    w = torch.randn(6, 2, device=device)
    fused = script_from_source(TRAINED)
    with fuser.enabled(True):
        for _ in range(4):
            x = torch.randn(5, 6, device=device, requires_grad=True)
            (grad,) = torch.autograd.grad(fused(x, w), x)
            torch.testing.assert_close(grad, w.sum(1).expand(5, 6))


def test_inputs_a_copy_would_differ_from_are_copied() -> None:
    # A conjugate, an offset into a larger storage, a tensor recording gradients (in
    # no_grad: the copy records none): ATen's copy resolves, starts at 0, records nothing.
    cases = [
        torch.randn(3, 4, dtype=torch.cfloat).conj(),
        torch.arange(13.0)[1:].view(3, 4),
        torch.randn(3, 4, requires_grad=True),
    ]
    for x in cases:
        with torch.no_grad():
            got = torch.ops.fuser.pad_unless_zero(x, [0, 0], "constant", None)
            want = torch.nn.functional.pad(x, (0, 0))
        assert got.data_ptr() != x.data_ptr()
        assert got.is_conj() == want.is_conj() and got.storage_offset() == want.storage_offset()
        assert got.requires_grad == want.requires_grad
        assert torch.equal(got, want)


PASSED_ON = """
def f(x):
    return torch.atleast_1d(torch.nn.functional.pad(x, (0, 0)))
"""

CONJ_PHYSICAL = """
def f(x):
    return torch.conj_physical(torch.nn.functional.pad(x, (0, 0)))
"""

UNSAFE_CHUNK = """
def f(x):
    return torch.unsafe_chunk(torch.nn.functional.pad(x, (0, 0)), 2)[0]
"""


@pytest.mark.parametrize("source", [PASSED_ON, CONJ_PHYSICAL, UNSAFE_CHUNK])
def test_a_pad_handed_on_by_an_op_that_may_return_it_stays(source: str) -> None:
    x = torch.ones(4, 4)
    with torch.no_grad():
        want, got, graph = both(source, x)
    assert count_kind(graph, ALIASED) == 0
    got.zero_()
    assert torch.equal(x, torch.ones(4, 4)) and not torch.equal(want, torch.zeros_like(want))
