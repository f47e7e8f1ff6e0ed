// Nodes that a pass may not move a pure op across: what they do would be seen in another
// order (a write the op reads before or after, a print, an error raised before or after
// the op's own).
#pragma once

#include <torch/csrc/jit/ir/ir.h>

namespace fuser {

// Whether `node` has side effects, writes a tensor or list in place (its schema's
// `(a!)`), or holds a block with such a node (an `if` around an assert).
bool isOrderBarrier(const torch::jit::Node* node);

// Whether a node strictly between `first` and `last` of one block is a barrier.
bool barrierBetween(const torch::jit::Node* first, const torch::jit::Node* last);

}  // namespace fuser
