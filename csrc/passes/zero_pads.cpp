// aliasZeroPads: a constant pad that pads nothing hands back its input, not a copy,
// where nobody could tell the two apart.
//
// Models pad to a multiple of their window size (`F.pad(x, (0, 0, 0, pad_r, 0, pad_b))`
// in torchvision's Swin, before each block's window attention), and at the usual input
// sizes the pads are all zero: ATen then copies the whole activation (constant_pad_nd
// clones what it would narrow). After this pass such a pad is fuser::pad_unless_zero
// (symbols.h), which hands back its input itself where every pad is zero and the input's
// elements are dense (the copy would have its strides then), and pads as ATen does
// otherwise (runtime/zero_pad_op.cpp).
//
// Only where the copy and its source are never written, in place or by a write made
// functional, and the copy never leaves the graph: there a reader cannot tell them apart.
#include <torch/csrc/jit/ir/ir.h>

#include <string>
#include <vector>

#include "passes/pipeline.h"
#include "passes/unwritten.h"
#include "symbols.h"

namespace fuser {
namespace {

using torch::jit::Node;

// aten::pad(self, pad, mode, value) with the constant mode, or aten::constant_pad_nd.
bool isConstantPad(const Node* node) {
  if (node->kind() == c10::aten::constant_pad_nd) return node->inputs().size() == 3;
  if (node->kind() != c10::aten::pad || node->inputs().size() != 4) return false;
  auto mode = torch::jit::toIValue(node->input(2));
  return mode && mode->isString() && mode->toStringRef() == "constant";
}

void collectPads(torch::jit::Block* block, std::vector<Node*>& pads) {
  for (Node* node : block->nodes()) {
    for (torch::jit::Block* sub : node->blocks()) collectPads(sub, pads);
    if (isConstantPad(node) &&
        node->input(0)->type()->kind() == c10::TypeKind::TensorType) {
      pads.push_back(node);
    }
  }
}

void replacePad(Node* pad) {
  torch::jit::Graph& graph = *pad->owningGraph();
  Node* replacement = graph.create(padUnlessZeroSymbol(), pad->inputs(), 1);
  replacement->insertBefore(pad);
  replacement->output()->setType(pad->output()->type());
  pad->output()->replaceAllUsesWith(replacement->output());
  pad->destroy();
}

}  // namespace

void aliasZeroPads(GraphPtr& graph) {
  std::vector<Node*> pads;
  collectPads(graph->block(), pads);
  // (None where alias analysis refuses the graph: pads stay.)
  for (Node* pad : copiesIndistinguishable(graph, pads)) replacePad(pad);
}

}  // namespace fuser
