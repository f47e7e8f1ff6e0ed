#include "passes/piece_subgraph.h"

#include <unordered_map>

namespace fuser {

PieceSubgraph copyPiece(const std::vector<torch::jit::Node*>& nodes,
                        const std::vector<torch::jit::Value*>& outputs, torch::jit::Value* first) {
  PieceSubgraph piece{std::make_shared<torch::jit::Graph>(), {}};
  torch::jit::Graph& subgraph = *piece.graph;
  std::unordered_map<torch::jit::Value*, torch::jit::Value*> inner;
  auto innerOf = [&](torch::jit::Value* v) -> torch::jit::Value* {
    auto found = inner.find(v);
    if (found != inner.end()) return found->second;
    torch::jit::Value* made = nullptr;
    if (v->node()->kind() == c10::prim::Constant) {
      torch::jit::Node* constant = subgraph.createClone(v->node(), [](torch::jit::Value* x) { return x; });
      subgraph.appendNode(constant);
      made = constant->output();
    } else {
      piece.inputs.push_back(v);
      made = subgraph.addInput()->setType(v->type());
    }
    inner.emplace(v, made);
    return made;
  };
  if (first) innerOf(first);
  for (torch::jit::Node* node : nodes) {
    torch::jit::Node* copy = subgraph.createClone(node, innerOf);
    subgraph.appendNode(copy);
    for (size_t i = 0; i < node->outputs().size(); ++i) inner[node->output(i)] = copy->output(i);
  }
  for (torch::jit::Value* out : outputs) subgraph.registerOutput(inner.at(out));
  return piece;
}

}  // namespace fuser
