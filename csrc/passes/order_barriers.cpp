#include "passes/order_barriers.h"

namespace fuser {

bool isOrderBarrier(const torch::jit::Node* node) {
  if (node->hasSideEffects()) return true;
  if (const c10::FunctionSchema* schema = node->maybeSchema()) {
    for (const c10::Argument& argument : schema->arguments()) {
      if (argument.alias_info() && argument.alias_info()->isWrite()) return true;
    }
  }
  for (const torch::jit::Block* block : node->blocks()) {
    for (const torch::jit::Node* inner : block->nodes()) {
      if (isOrderBarrier(inner)) return true;
    }
  }
  return false;
}

bool barrierBetween(const torch::jit::Node* first, const torch::jit::Node* last) {
  for (const torch::jit::Node* node = first->next(); node != last; node = node->next()) {
    if (isOrderBarrier(node)) return true;
  }
  return false;
}

}  // namespace fuser
