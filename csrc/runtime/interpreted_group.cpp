#include "runtime/interpreted_group.h"

#include "passes/chunks.h"
#include "passes/lone_writes.h"
#include "stats.h"

namespace fuser::runtime {

void InterpretedGroup::run(torch::jit::Stack& stack) {
  std::call_once(once_, [&] {
    auto copy = subgraph_->copy();
    expandBroadcastingChunks(copy->block());
    writeFunctionalWritesInPlace(copy->block());  // self's strides, as the kernel keeps them
    code_ = std::make_unique<torch::jit::Code>(copy, "fuser_fusion_group");
  });
  stats().interpreted_runs++;
  torch::jit::InterpreterState(*code_).run(stack);
}

}  // namespace fuser::runtime
