// runSoftmaxBeforeViews: a softmax over the last dim of a view runs before the view,
// so that it joins the group that computes the viewed value.
//
// Swin's attention adds its window mask in a view of the scores ([B, windows, heads, N,
// N]) and views the sum back before the softmax: add -> view -> softmax. The view is no
// fusible op, so the softmax stays a group of its own, a full read and write of the
// scores. A view that keeps the last dim keeps every row of it whole and in order, so
// softmax(view(x), -1) is view(softmax(x, -1)), element for element: after this pass the
// softmax reads x, and partition merges it with the add.
//
// Only where the profiled types say so: softmax or log_softmax over the last dim of an
// aten::view or aten::reshape that it alone reads, of a complete, row-major value of the
// same last size that a fusible node computes (else nothing would join).
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include <vector>

#include "ops/lowering_rules.h"
#include "passes/fusibility.h"
#include "passes/pipeline.h"

namespace fuser {
namespace {

using torch::jit::Node;
using torch::jit::Value;

bool isSoftmax(const Node* node) {
  return (node->kind() == c10::aten::softmax || node->kind() == c10::aten::log_softmax) &&
         node->inputs().size() == 3;
}

// The view that `softmax` reads, where it may run before it; else null.
Node* viewBefore(const Node* softmax) {
  Node* view = softmax->input(0)->node();
  if (!isView(view) || view->owningBlock() != softmax->owningBlock() ||
      view->output()->uses().size() != 1) {
    return nullptr;
  }
  auto viewed = completeTensorType(view->output());
  auto source = completeTensorType(view->input(0));
  auto dim = torch::jit::constant_as<int64_t>(softmax->input(1));
  if (!viewed || !source || !dim || !ops::isProfiledRowMajor(*source)) return nullptr;
  const std::vector<int64_t> out = *viewed->sizes().concrete_sizes();
  const std::vector<int64_t> in = *source->sizes().concrete_sizes();
  const int64_t last = static_cast<int64_t>(out.size()) - 1;
  if (out.empty() || in.empty() || (*dim != last && *dim != -1) || out.back() != in.back()) {
    return nullptr;
  }
  if (!checkFusible(view->input(0)->node())) return nullptr;
  return view;
}

void moveSoftmaxesIn(torch::jit::Block* block) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* softmax = *it++;
    for (torch::jit::Block* sub : softmax->blocks()) moveSoftmaxesIn(sub);
    if (!isSoftmax(softmax)) continue;
    Node* view = viewBefore(softmax);
    if (!view) continue;
    Value* source = view->input(0);
    auto source_type = completeTensorType(source);
    auto out_type = softmax->output()->type()->expect<c10::TensorType>();
    torch::jit::Graph& graph = *softmax->owningGraph();
    torch::jit::WithInsertPoint here(view);
    Value* last = graph.insertConstant(static_cast<int64_t>(*source_type->dim()) - 1);
    softmax->replaceInput(0, source);
    softmax->replaceInput(1, last);
    softmax->moveBefore(view);
    softmax->output()->replaceAllUsesWith(view->output());
    view->replaceInput(0, softmax->output());
    view->output()->setType(out_type);
    softmax->output()->setType(source_type->withScalarType(out_type->scalarType()));
  }
}

}  // namespace

void runSoftmaxBeforeViews(GraphPtr& graph) { moveSoftmaxesIn(graph->block()); }

}  // namespace fuser
