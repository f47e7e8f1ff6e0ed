"""Random example inputs: from command-line specs (`float32[32,3,224,224]`, optionally
`@cuda`) and from profiled value types (to time a group alone)."""

from __future__ import annotations

import re
from typing import Any

import torch

_SPEC = re.compile(r"^(?P<dtype>\w+)\[(?P<dims>[\d,\s]*)\](?:@(?P<device>[\w:]+))?$")


def parse_spec(spec: str) -> tuple[torch.dtype, list[int], str]:
    """`float32[2,3]@cuda` -> (torch.float32, [2, 3], "cuda"); the device defaults to cpu."""
    match = _SPEC.match(spec.strip())
    dtype = getattr(torch, match.group("dtype"), None) if match else None
    if match is None or not isinstance(dtype, torch.dtype):
        raise ValueError(
            f"input spec '{spec}' is not understood; expected DTYPE[D0,D1,...][@DEVICE], "
            "e.g. float32[32,3,224,224] or int64[8]@cuda"
        )
    dims = [int(d) for d in match.group("dims").replace(" ", "").split(",") if d]
    return dtype, dims, match.group("device") or "cpu"


def random_tensor(
    dtype: torch.dtype,
    sizes: list[int],
    device: str,
    strides: list[int] | None = None,
) -> torch.Tensor:
    if strides is None:
        out = torch.empty(sizes, dtype=dtype, device=device)
    else:
        out = torch.empty_strided(sizes, strides, dtype=dtype, device=device)
    if dtype.is_floating_point or dtype.is_complex:
        out.normal_()
    elif dtype == torch.bool:
        out.random_(0, 2)
    else:
        out.random_(0, 10)
    return out


def from_spec(spec: str) -> torch.Tensor:
    return random_tensor(*parse_spec(spec))


def for_value(value: Any) -> Any | None:
    """A random argument matching a value's profiled type: a tensor of its dtype, sizes,
    strides and device, or 1 / 1.0 / True for a scalar; None when the type is incomplete."""
    kind = value.type().kind()
    if kind == "IntType":
        return 1
    if kind == "FloatType":
        return 1.0
    if kind == "BoolType":
        return True
    if kind != "TensorType":
        return None
    t = value.type()
    sizes, strides = t.varyingSizes(), t.strides()
    if (
        t.dtype() is None
        or t.device() is None
        or sizes is None
        or strides is None
        or any(d is None for d in list(sizes) + list(strides))
    ):
        return None
    return random_tensor(t.dtype(), list(sizes), str(t.device()), list(strides))
