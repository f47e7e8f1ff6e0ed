// Writes made functional (passes/inplace.cpp) written in place again where nothing
// observes the difference; passes/lone_writes.cpp says when.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

namespace fuser {

// Whether `node` is an in-place write prepareGraph made functional (inplace.cpp): it
// carries the like_self attribute, or is fuser::masked_fill_like_self.
bool isFunctionalWrite(const torch::jit::Node* node);

// Every such write in `block` and its sub-blocks that no group took. Also for a group's
// subgraph that the interpreter runs (profiled types still on it).
void writeFunctionalWritesInPlace(torch::jit::Block* block);

}  // namespace fuser
