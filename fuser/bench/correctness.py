"""Comparing a mode's results with eager PyTorch's, with a reason when they differ.

float32 uses `torch.testing.assert_close`'s defaults. float16/bfloat16 get a few units in
the last place of room: the fuser keeps intermediates in float (DESIGN.md section 5), so
it is closer to exact than eager's per-op rounding, and the two differ by that rounding.
"""

from __future__ import annotations

from typing import Any

import torch

# (rtol, atol): about 8 units in the last place of each low-precision type.
_LOW_PRECISION_TOLERANCES = {
    torch.float16: (8e-3, 8e-3),
    torch.bfloat16: (6e-2, 6e-2),
}
MAX_REASON_LINES = 6

# Gradients of weights are sums over the batch: a GEMM blocked differently, or gate math
# kept in float, moves single elements further than elementwise tolerances allow while
# the whole tensor agrees. Training rows compare ||actual - expected|| / ||expected||,
# with about 8 units in the last place of each type.
_NORM_WISE_TOLERANCES = {
    torch.float32: 1e-6,
    torch.float16: 8e-3,
    torch.bfloat16: 6e-2,
}


# Whole models (fuser/bench/models.py) are compared norm-wise too: freezing folds batch
# norms into convolution weights, rounded in the model's dtype, and convolutions may
# pick other algorithms; fifty layers compound those roundings. Measured on CPU (tiny
# sizes), frozen TorchScript against eager: resnet50 1.5e-3 in float16, 1.3e-2 in
# bfloat16; mobilenet_v3_large 7.8e-4 and 6.4e-3; eager itself is as far from float32.
_MODEL_TOLERANCES = {
    torch.float32: 1e-4,
    torch.float16: 1e-2,
    torch.bfloat16: 6e-2,
}
# cuDNN convolutions run float32 in TF32 by default (torch.backends.cudnn.allow_tf32): on
# the H100, frozen TorchScript, NNC and torch.compile all ended 3e-4 (mobilenet_v3_large)
# to 7e-4 (resnet50) from eager, as far as TF32's 10-bit mantissa lets fifty layers drift.
_MODEL_TF32_TOLERANCE = 2e-3


def model_tolerances(on_cuda: bool) -> dict[torch.dtype, float]:
    """The norm-wise tolerances of whole models; float32 gets TF32's room on CUDA."""
    if on_cuda and torch.backends.cudnn.allow_tf32:
        return {**_MODEL_TOLERANCES, torch.float32: _MODEL_TF32_TOLERANCE}
    return _MODEL_TOLERANCES


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for v in value for t in _tensors(v)]


def _norm_wise_mismatch(
    actual: Any, expected: Any, dtype: torch.dtype, tolerances: dict[torch.dtype, float]
) -> str | None:
    got, want = _tensors(actual), _tensors(expected)
    if len(got) != len(want):
        return f"{len(got)} tensors, expected {len(want)}"
    tolerance = tolerances.get(dtype, tolerances[torch.float32])
    for index, (a, e) in enumerate(zip(got, want, strict=True)):
        if (a.shape, a.dtype, a.device) != (e.shape, e.dtype, e.device):
            got_kind = f"{a.dtype}{list(a.shape)} on {a.device}"
            return f"item [{index}]: {got_kind}, expected {e.dtype}{list(e.shape)} on {e.device}"
        error = float((a.double() - e.double()).norm() / e.double().norm().clamp_min(1e-30))
        if not error <= tolerance:  # NaN fails too
            return f"item [{index}]: norm-wise relative error {error:.3g} (up to {tolerance:g})"
    return None


def mismatch(
    actual: Any, expected: Any, dtype: torch.dtype, *, norm_wise: bool = False, model: bool = False
) -> str | None:
    """None when `actual` matches `expected` (values, dtype, shape, device); otherwise
    the first lines of assert_close's explanation. `norm_wise`: each tensor as a whole
    (training rows' gradients), not element by element; `model`: norm-wise, with the
    room a whole frozen model needs."""
    if model:
        on_cuda = any(t.is_cuda for t in _tensors(expected))
        return _norm_wise_mismatch(actual, expected, dtype, model_tolerances(on_cuda))
    if norm_wise:
        return _norm_wise_mismatch(actual, expected, dtype, _NORM_WISE_TOLERANCES)
    rtol, atol = _LOW_PRECISION_TOLERANCES.get(dtype, (None, None))
    try:
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)
    except AssertionError as error:
        lines = [line for line in str(error).splitlines() if line.strip()]
        return "\n".join(lines[:MAX_REASON_LINES])
    return None


def random_mismatch(
    actual: Any, expected: Any, dtype: torch.dtype, p: float, *, training: bool = False
) -> str | None:
    """Results of a workload ending in dropout(p), each mode with its own mask: shapes,
    dtypes and strides must be eager's, the elements both kept must equal eager's, and
    the kept counts may differ by no more than chance allows (6 deviations of the
    difference of two binomial counts). A training step's results (dropout inside,
    gradients after it) share no element with eager's: shapes, dtypes, strides and
    finiteness only; tests/python/test_dropout.py checks the values."""
    for index, (a, e) in enumerate(zip(_tensors(actual), _tensors(expected), strict=True)):
        if (a.shape, a.dtype, a.stride()) != (e.shape, e.dtype, e.stride()):
            got_kind = f"{a.dtype}{list(a.shape)} strides {a.stride()}"
            return f"item [{index}]: {got_kind}, expected {e.dtype}{list(e.shape)} {e.stride()}"
        if training:
            if not bool(torch.isfinite(a).all()):
                return f"item [{index}]: not finite"
            continue
        both = (a != 0) & (e != 0)
        reason = mismatch(a[both], e[both], dtype)
        if reason is not None:
            return f"item [{index}], where both kept: {reason}"
        live = int(((a != 0) | (e != 0)).sum())
        allowed = 6 * (2 * live * p * (1 - p)) ** 0.5 + 1
        kept_a, kept_e = int((a != 0).sum()), int((e != 0).sum())
        if abs(kept_a - kept_e) > allowed:
            return f"item [{index}]: {kept_a} kept, eager {kept_e} (chance allows {allowed:.0f})"
    return None


def short_reason(error: BaseException, limit: int = 160) -> str:
    """One line naming an exception, for an n/a cell's note."""
    first_line = next((line for line in str(error).splitlines() if line.strip()), "")
    text = f"{type(error).__name__}: {first_line.strip()}"
    return text if len(text) <= limit else text[: limit - 3] + "..."
