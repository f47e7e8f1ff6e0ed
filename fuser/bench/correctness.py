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


def mismatch(actual: Any, expected: Any, dtype: torch.dtype) -> str | None:
    """None when `actual` matches `expected` (values, dtype, shape, device); otherwise
    the first lines of assert_close's explanation."""
    rtol, atol = _LOW_PRECISION_TOLERANCES.get(dtype, (None, None))
    try:
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)
    except AssertionError as error:
        lines = [line for line in str(error).splitlines() if line.strip()]
        return "\n".join(lines[:MAX_REASON_LINES])
    return None


def short_reason(error: BaseException, limit: int = 160) -> str:
    """One line naming an exception, for an n/a cell's note."""
    first_line = next((line for line in str(error).splitlines() if line.strip()), "")
    text = f"{type(error).__name__}: {first_line.strip()}"
    return text if len(text) <= limit else text[: limit - 3] + "..."
