// Shape expressions: int[] values computed from tensor sizes (aten::size,
// prim::BroadcastSizes, prim::ChunkSizes), built by buildShapeExpressions (pipeline.h).
#pragma once

#include <torch/csrc/jit/ir/ir.h>

namespace fuser {

// `aten::size(x) -> int[]`, the overload without a dimension.
bool isWholeSize(const torch::jit::Node* node);

// Peephole over shape expressions in `block` and its sub-blocks: a BroadcastSizes of one
// operand is that operand; repeated operands are kept once; a BroadcastSizes read only by
// another is folded into it. Dead expressions are removed.
void simplifyShapeExpressions(torch::jit::Block* block);

}  // namespace fuser
