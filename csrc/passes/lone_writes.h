// Writes made functional (passes/inplace.cpp) written in place again where nothing
// observes the difference; passes/lone_writes.cpp says when.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

namespace fuser {

// Every such write in `block` and its sub-blocks that no group took. Also for a group's
// subgraph that the interpreter runs (profiled types still on it).
void writeFunctionalWritesInPlace(torch::jit::Block* block);

}  // namespace fuser
