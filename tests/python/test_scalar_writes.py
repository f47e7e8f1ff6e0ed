"""`x[i:j] = number` writes with fuser::fill_with_scalar_, not by copying in a host tensor
(passes/scalar_writes.cpp, runtime/fill_with_scalar_op.cpp): the values TorchScript's copy
writes, in every dtype, with no host-to-device copy (a stream synchronization) on CUDA.
tests/cpp/test_scalar_writes checks which graphs are rewritten."""

from __future__ import annotations

import pytest
import torch

import fuser
from helpers import count_kind, devices, run_optimized, script_from_source, torchscript_alone

FILL = "fuser::fill_with_scalar_"

# A mask built from numbers written to slices and elements (torchvision's Swin builds its
# shifted-window mask so): ints, floats, a bool, a number known only at run time.
SLICE_WRITES = """
def f(x, n: int, v: float):
    m = torch.zeros(x.size(0), x.size(1), dtype=x.dtype, device=x.device)
    m[0:2, 0:3] = 3
    m[2:, :] = 0.1
    m[1, 4] = n
    m[3, -2:] = v
    m[-1] = -70000
    seen = torch.zeros(x.size(1), dtype=torch.bool, device=x.device)
    seen[1:3] = True
    return x + m, m, seen
"""

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int64]


def reference_and_fused(source: str, *args: object) -> tuple[object, object, object]:
    """TorchScript alone, then ours, each from its own scripted copy; and our graph
    (held by the function, which must outlive the call that reads it)."""
    with torch.no_grad():
        with torchscript_alone():
            want = run_optimized(script_from_source(source), *args)
        fused = script_from_source(source)
        with fuser.enabled(True):
            got = run_optimized(fused, *args)
            graph = torch.jit.last_executed_optimized_graph()
    return want, got, graph


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_numbers_written_to_slices_are_torchscripts_values(device: str, dtype: torch.dtype) -> None:
    x = torch.arange(30, device=device).view(6, 5).to(dtype)
    # 300 wraps in int8, -70000 and 1e30 overflow float16 to infinities: as the
    # copied host tensor converts them. 0.1 goes through float32 first, even into float64.
    want, got, graph = reference_and_fused(SLICE_WRITES, x, 300, 1e30)
    for w, g in zip(want, got, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape and g.stride() == w.stride()
        torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True)
    assert count_kind(graph, FILL) >= 6, graph
    assert count_kind(graph, "aten::tensor") == 0, graph


def test_float64_numbers_go_through_the_default_dtype() -> None:
    # The float32 step is TorchScript's own (aten::tensor.float), not eager's.
    x = torch.zeros(6, 5, dtype=torch.float64)
    _, got, _ = reference_and_fused(SLICE_WRITES, x, 1, 2.0)
    assert got[1][2, 0].item() == float(torch.tensor(0.1, dtype=torch.float32))


WRITE_TO_EXPANDED = """
def f(x):
    y = x.expand(3, 4)
    y[0:2] = 5
    return x
"""


@pytest.mark.parametrize("device", devices())
def test_a_write_to_elements_sharing_memory_raises_as_the_copy_does(device: str) -> None:
    x = torch.zeros(1, 4, device=device)
    for enabled in (False, True):
        fn = script_from_source(WRITE_TO_EXPANDED)
        with fuser.enabled(enabled), pytest.raises(RuntimeError, match="single memory location"):
            run_optimized(fn, x)


# The number's tensor read twice, or with another dtype than the view's: left as it is.
NOT_REWRITTEN = """
def f(x):
    t = torch.tensor(2.5, dtype=torch.float64, device=x.device)
    x[0] = t
    x[1] = t
    x[2:3].copy_(torch.tensor(7, dtype=torch.int32, device=x.device))
    return x
"""


@pytest.mark.parametrize("device", devices())
def test_other_host_tensors_are_copied_as_before(device: str) -> None:
    x = torch.randn(4, 3, device=device)
    want, got, graph = reference_and_fused(NOT_REWRITTEN, x.clone())
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert count_kind(graph, FILL) == 0, graph


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_writes_copy_nothing_from_the_host() -> None:
    x = torch.randn(6, 5, device="cuda")
    fn = script_from_source(SLICE_WRITES)
    with torch.no_grad(), fuser.enabled(True):
        run_optimized(fn, x, 7, 0.5)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            fn(x, 7, 0.5)
            torch.cuda.synchronize()
    names = [event.name for event in prof.events()]
    assert not [n for n in names if "HtoD" in n], names
    assert any("fill" in n.lower() for n in names), names
