#include "passes/strided_copies.h"

namespace fuser {

std::optional<std::vector<size_t>> copiedInputs(const torch::jit::Graph& subgraph) {
  for (const torch::jit::Node* node : subgraph.nodes()) {
    if (node->kind() == c10::prim::Constant) continue;
    if (node->kind() != c10::aten::contiguous ||
        node->input(0)->node() != subgraph.param_node()) {
      return std::nullopt;
    }
  }
  std::vector<size_t> copied;
  for (const torch::jit::Value* out : subgraph.outputs()) {
    const torch::jit::Node* node = out->node();
    if (node->kind() != c10::aten::contiguous) return std::nullopt;
    copied.push_back(node->input(0)->offset());
  }
  if (copied.empty()) return std::nullopt;
  return copied;
}

}  // namespace fuser
