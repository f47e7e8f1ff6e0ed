// Where a node lies relative to a block that may hold it in a sub-block.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

namespace fuser {

// The node of `block` that holds `node` (itself where it lies in `block`, an `if` or loop
// of `block` where it lies in one of their blocks), or null where `block` does not hold it.
inline const torch::jit::Node* holderIn(const torch::jit::Node* node,
                                        const torch::jit::Block* block) {
  while (node && node->owningBlock() != block) node = node->owningBlock()->owningNode();
  return node;
}

}  // namespace fuser
