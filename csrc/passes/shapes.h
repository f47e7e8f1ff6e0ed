// Shape expressions: int[] values computed from tensor sizes (aten::size,
// prim::BroadcastSizes, prim::ChunkSizes), built by buildShapeExpressions (pipeline.h).
#pragma once

#include <torch/csrc/jit/ir/ir.h>

namespace fuser {

// `aten::size(x) -> int[]`, the overload without a dimension.
bool isWholeSize(const torch::jit::Node* node);

// Ops of the fusible table whose result has their first operand's shape whatever the
// other operands' (type_as, to.other, batch_norm, masked_fill_like_self); every other
// elementwise op's result has the broadcast of its tensor operands' shapes.
bool keepsSelfShape(const torch::jit::Node* node);

// Peephole over shape expressions in `block` and its sub-blocks: a BroadcastSizes of one
// operand is that operand; repeated operands are kept once; a BroadcastSizes read only by
// another is folded into it. Dead expressions are removed.
void simplifyShapeExpressions(torch::jit::Block* block);

}  // namespace fuser
