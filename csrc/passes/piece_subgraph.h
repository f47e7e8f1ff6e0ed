// A piece of a graph copied into a subgraph of its own, for a node that runs the piece
// itself (fuser::PerShapeValues, fuser::Relayout).
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <vector>

namespace fuser {

struct PieceSubgraph {
  std::shared_ptr<torch::jit::Graph> graph;
  std::vector<torch::jit::Value*> inputs;  // the outer values its inputs stand for
};

// Copies `nodes` (in graph order, with their blocks) into a new graph whose outputs
// stand for `outputs`. Constants the nodes read are copied in; every other value they
// read from outside becomes an input, `first` (where given) the first of them.
PieceSubgraph copyPiece(const std::vector<torch::jit::Node*>& nodes,
                        const std::vector<torch::jit::Value*>& outputs,
                        torch::jit::Value* first = nullptr);

}  // namespace fuser
