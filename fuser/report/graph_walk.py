"""Walking a graph the pass captured (fuser._C._take_captured_graphs): which nodes are
operators, which are fusion groups, and what their values weigh.

A captured graph is the pipeline's result before cleanup, so every value still carries
its profiled type (dtype, device, sizes). A guarded group sits in the true block of a
prim::If whose condition is a fuser::TypeGuard; the walk yields the group and skips the
guard and the fallback block (the unfused copy would count every node twice).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

FUSION_GROUP = "fuser::FusionGroup"
TYPE_GUARD = "fuser::TypeGuard"
REASON_ATTR = "fuser_reason"
CHUNK_KINDS = ("prim::ConstantChunk", "prim::BroadcastingChunk")

# Operators that return a view or metadata: no kernel runs and no bytes move for them.
NO_KERNEL_OPS = frozenset(
    {
        "aten::size",
        "aten::dim",
        "aten::numel",
        "aten::view",
        "aten::reshape",
        "aten::expand",
        "aten::expand_as",
        "aten::t",
        "aten::transpose",
        "aten::permute",
        "aten::slice",
        "aten::select",
        "aten::unsqueeze",
        "aten::squeeze",
        "aten::chunk",
        "aten::split",
        "aten::unbind",
        "aten::detach",
        "aten::alias",
        "aten::__getitem__",
        "aten::len",
        "aten::contiguous",
        "prim::ConstantChunk",
        "prim::BroadcastingChunk",
    }
)

_DTYPE_NAMES = {
    "torch.float32": "f32",
    "torch.float64": "f64",
    "torch.float16": "f16",
    "torch.bfloat16": "bf16",
    "torch.int64": "i64",
    "torch.int32": "i32",
    "torch.int16": "i16",
    "torch.int8": "i8",
    "torch.uint8": "u8",
    "torch.bool": "bool",
}


def is_guarded_if(node: Any) -> bool:
    return node.kind() == "prim::If" and node.inputsAt(0).node().kind() == TYPE_GUARD


def is_tensor(value: Any) -> bool:
    return value.type().kind() == "TensorType"


def is_op(node: Any) -> bool:
    """An operator the report counts: an aten op touching tensors, or a chunk (the same
    nodes the partition gives a reason for)."""
    kind = node.kind()
    if kind in CHUNK_KINDS:
        return True
    if not kind.startswith("aten::"):
        return False
    return any(is_tensor(v) for v in list(node.inputs()) + list(node.outputs()))


def launches_kernel(node: Any) -> bool:
    """Whether the op runs a kernel of its own when it is not fused."""
    return is_op(node) and node.kind() not in NO_KERNEL_OPS


def walk(block: Any) -> Iterator[Any]:
    """Nodes of `block` and its sub-blocks in program order; a guarded group appears as its
    fuser::FusionGroup node, guards and fallbacks do not appear."""
    for node in block.nodes():
        if node.kind() == TYPE_GUARD:
            continue
        if is_guarded_if(node):
            yield from (n for n in next(iter(node.blocks())).nodes() if n.kind() == FUSION_GROUP)
            continue
        yield node
        for sub in node.blocks():
            yield from walk(sub)


def subgraph_ops(group: Any) -> list[Any]:
    return [n for n in group.g("Subgraph").nodes() if is_op(n)]


def reason_of(node: Any) -> str | None:
    return node.s(REASON_ATTR) if node.hasAttribute(REASON_ATTR) else None


def dtype_name(value: Any) -> str:
    """Short dtype of a value: f32, i64, ...; `?` for a tensor without a profiled dtype;
    the type's name for a non-tensor."""
    if not is_tensor(value):
        return str(value.type())
    dtype = value.type().dtype()
    return _DTYPE_NAMES.get(str(dtype), str(dtype).replace("torch.", "")) if dtype else "?"


def sizes(value: Any) -> list[int] | None:
    """The profiled sizes of a tensor value, None when any is unknown."""
    if not is_tensor(value):
        return None
    dims = value.type().varyingSizes()
    if dims is None or any(d is None for d in dims):
        return None
    return [int(d) for d in dims]


def device_of(value: Any) -> str | None:
    if not is_tensor(value):
        return None
    device = value.type().device()
    return None if device is None else str(device)


def value_bytes(value: Any) -> int | None:
    """Bytes of a tensor value with complete profiled sizes and dtype, else None. A list
    built by prim::ListConstruct (a cat's pieces) weighs its elements."""
    if value.node().kind() == "prim::ListConstruct":
        parts = [value_bytes(v) for v in value.node().inputs()]
        return None if any(p is None for p in parts) else sum(p for p in parts if p)
    dims = sizes(value)
    dtype = value.type().dtype() if is_tensor(value) else None
    if dims is None or dtype is None:
        return None
    numel = 1
    for d in dims:
        numel *= d
    return numel * _element_size(dtype)


def _element_size(dtype: Any) -> int:
    import torch

    return torch.empty((), dtype=dtype).element_size()


def size_label(value: Any) -> str:
    """`f32[4, 5]`, the edge label of a drawing; `?` parts where the profile is missing."""
    if not is_tensor(value):
        return str(value.type())
    dims = value.type().varyingSizes()
    text = "?" if dims is None else ", ".join("?" if d is None else str(d) for d in dims)
    return f"{dtype_name(value)}[{text}]"
