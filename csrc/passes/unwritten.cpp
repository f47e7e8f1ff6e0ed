#include "passes/unwritten.h"

#include <functional>

#include "passes/lone_writes.h"

namespace fuser {
namespace {

using torch::jit::Node;

bool mayReturnItsInput(const Node* node) {
  static const std::unordered_set<c10::Symbol> kinds = {
      c10::aten::type_as, c10::aten::dropout, c10::aten::feature_dropout,
      c10::aten::alpha_dropout, c10::aten::feature_alpha_dropout, c10::aten::native_dropout};
  return kinds.count(node->kind()) > 0 && !node->inputs().empty();
}

}  // namespace

bool staysUnwritten(const std::vector<torch::jit::Value*>& tensors, torch::jit::AliasDb& aliases,
                    torch::jit::Graph& graph, const std::unordered_set<const Node*>& except) {
  if (tensors.empty()) return true;
  const torch::jit::ValueSet set(tensors.begin(), tensors.end());
  bool written = false;
  std::function<void(torch::jit::Block*)> visit = [&](torch::jit::Block* block) {
    for (Node* node : block->nodes()) {
      if (written) return;
      for (torch::jit::Block* sub : node->blocks()) visit(sub);
      if (except.count(node)) continue;
      if (aliases.writesToAlias(node, set)) written = true;
      if ((isFunctionalWrite(node) || mayReturnItsInput(node)) &&
          aliases.mayContainAlias(node->input(0), tensors)) {
        written = true;
      }
    }
  };
  visit(graph.block());
  return !written;
}

}  // namespace fuser
