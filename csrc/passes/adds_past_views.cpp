// sinkAddsPastViews: a bias add that a view separates from the work after it moves past
// the view, so that it joins that work's group.
//
// TorchScript decomposes addmm into mm + add (the bias), and transformers' Conv1D (GPT-2's
// every projection) views the product back to [B, T, N] before the activation or
// residual add that follows: mm -> add(bias) -> view -> gelu. The view is no fusible op,
// so the add stays a kernel of its own, a full read and write of the product. After this
// pass such an add reads the viewed product instead: mm -> view -> add(bias) -> gelu,
// and partition merges the add with what follows.
//
// The same sums: the product is row-major and the view keeps the trailing dims the other
// operand spans (it regroups only dims that operand broadcasts along), so every element
// meets the same operand element, in the same dtype. Only where the profiled types say
// so: a complete, row-major product of the add's own sizes and dtype, an operand of at
// most as many dims as the view's result, a view whose result keeps the trailing dims of
// that operand (past its leading 1s: Swin's relative position bias [1, heads, N, N] added
// to [windows, heads, N, N] before the view to [B, windows per image, heads, N, N]), the add
// read by the view alone, and the view read by a fusible node (else nothing would join).
// Adds left to oneDNN Graph (its matmul + bias pattern) stay where they are.
#include <torch/csrc/jit/ir/ir.h>

#include <optional>
#include <vector>

#include "ops/lowering_rules.h"
#include "passes/fusibility.h"
#include "passes/onednn_beside.h"
#include "passes/pipeline.h"

namespace fuser {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// Which of the add's operands (0 or 1) is the product the view may read instead: of the
// add's sizes, dtype and row-major; the other operand spans trailing dims the view keeps.
std::optional<size_t> viewableOperand(const Node* add, const c10::TensorType& viewed) {
  auto out = completeTensorType(add->output());
  if (!out) return std::nullopt;
  const std::vector<int64_t> out_sizes = *out->sizes().concrete_sizes();
  const std::vector<int64_t> view_sizes = *viewed.sizes().concrete_sizes();
  for (size_t i = 0; i < 2; ++i) {
    auto product = completeTensorType(add->input(i));
    auto other = completeTensorType(add->input(1 - i));
    if (!product || !other || product->scalarType() != out->scalarType() ||
        *product->sizes().concrete_sizes() != out_sizes || !ops::isProfiledRowMajor(*product)) {
      continue;
    }
    const std::vector<int64_t> other_sizes = *other->sizes().concrete_sizes();
    const size_t rank = other_sizes.size();
    size_t spanned = rank;  // past the leading 1s, which broadcast into any dims
    while (spanned > 0 && other_sizes[rank - spanned] == 1) --spanned;
    if (rank > out_sizes.size() || rank > view_sizes.size()) continue;
    if (!std::equal(out_sizes.end() - spanned, out_sizes.end(), view_sizes.end() - spanned)) {
      continue;
    }
    return i;
  }
  return std::nullopt;
}

void sinkIn(torch::jit::Block* block) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* view = *it++;
    for (torch::jit::Block* sub : view->blocks()) sinkIn(sub);
    if (!isView(view)) continue;
    Node* add = view->input(0)->node();
    if (add->kind() != c10::aten::add || add->inputs().size() != 3 ||
        add->owningBlock() != block || add->output()->uses().size() != 1 ||
        isLeftToOneDnn(add)) {
      continue;
    }
    auto viewed = completeTensorType(view->output());
    if (!viewed || !readByFusibleNode(view->output())) continue;
    std::optional<size_t> product = viewableOperand(add, *viewed);
    if (!product) continue;
    // view(product) first, then the add of the other operand, in the add's own order.
    view->replaceInput(0, add->input(*product));
    add->moveAfter(view);
    view->output()->replaceAllUsesWith(add->output());
    add->replaceInput(*product, view->output());
    add->output()->setType(viewed);
  }
}

}  // namespace

void sinkAddsPastViews(GraphPtr& graph) { sinkIn(graph->block()); }

}  // namespace fuser
