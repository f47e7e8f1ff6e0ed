// Helpers shared by the graph tests: IR text with type placeholders, node counting.
#pragma once

#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/ir/irparser.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fuser::testing_helpers {

using TypeNames = std::vector<std::pair<std::string, std::string>>;

// Parses `ir` after replacing each placeholder (e.g. "$T") by its complete tensor type.
// parseIR numbers node outputs; with `keep_names`, every value keeps its name from the
// text (for tests that check messages naming values).
inline std::shared_ptr<torch::jit::Graph> parseWithTypes(std::string ir, const TypeNames& types,
                                                         bool keep_names = false) {
  for (const auto& [key, type] : types) {
    for (size_t at = ir.find(key); at != std::string::npos; at = ir.find(key, at)) {
      ir.replace(at, key.size(), type);
    }
  }
  auto graph = std::make_shared<torch::jit::Graph>();
  std::unordered_map<std::string, torch::jit::Value*> names;
  torch::jit::parseIR(ir, graph.get(), names);
  if (keep_names) {
    for (const auto& [name, value] : names) value->setDebugName(name);
  }
  return graph;
}

// Nodes of `kind` in `block` and all its sub-blocks.
inline size_t countKind(torch::jit::Block* block, c10::Symbol kind) {
  size_t n = 0;
  for (torch::jit::Node* node : block->nodes()) {
    if (node->kind() == kind) ++n;
    for (torch::jit::Block* sub : node->blocks()) n += countKind(sub, kind);
  }
  return n;
}

}  // namespace fuser::testing_helpers
