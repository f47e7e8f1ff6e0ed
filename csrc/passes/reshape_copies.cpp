// copyReshapeInputs: a reshape that ATen would copy copies by an explicit
// aten::contiguous first, which a group takes.
//
// Attention written by hand merges its heads with `out.transpose(1, 2).reshape(B, N, C)`
// (timm's transformers, torchvision's Swin): the heads and the head dim do not merge into
// one stride, so ATen's reshape copies, with its strided elementwise copy (12 per call in
// Swin-T, twice the time the bytes take on the H200). After this pass such a reshape
// reads `aten::contiguous(x)`: the same copy, made explicit, so a group takes it (a copy
// kernel of 16-byte accesses, tiles where the innermost dims disagree), and the reshape
// is then a view. Its values are ATen's.
//
// Only where the profiled types say ATen copies (sizes and strides known, the new sizes
// no view of them), where the input is a product's result seen through transposes or
// permutes (its strides follow from its sizes: a call with other sizes cannot make the
// reshape a view of a tensor that is not row-major), on CUDA (on the CPU a lone copy
// group is dissolved again), where nothing records gradients, and where neither the
// input nor the reshaped value is ever written and the latter never leaves the graph
// (an output, an attribute, a list): a view and a copy differ only to a write.
#include <ATen/TensorUtils.h>
#include <c10/core/MemoryFormat.h>
#include <torch/csrc/jit/ir/ir.h>

#include <unordered_set>
#include <vector>

#include "passes/fusibility.h"
#include "passes/pipeline.h"
#include "passes/unwritten.h"

namespace fuser {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// Whether ATen's reshape of a tensor of `from`'s sizes and strides to `to`'s sizes copies.
bool reshapeCopies(const c10::TensorType& from, const c10::TensorType& to) {
  const std::vector<int64_t> sizes = *from.sizes().concrete_sizes();
  const std::vector<int64_t> strides = *from.strides().concrete_sizes();
  const std::vector<int64_t> new_sizes = *to.sizes().concrete_sizes();
  return !at::detail::computeStride(sizes, strides, new_sizes).has_value();
}

// Whether `v` is a product's result, or a transpose or permute of one: a new row-major
// tensor seen through a fixed permutation, whose strides the types of a later call with
// other sizes give as the profile did (an input's own layout could change between
// calls, and a reshape that copied could then view).
bool permutedProduct(const Value* v) {
  static const std::unordered_set<c10::Symbol> products = {
      c10::aten::matmul, c10::aten::bmm, c10::aten::mm, c10::aten::linear, c10::aten::addmm,
      c10::aten::baddbmm};
  const Node* node = v->node();
  while (node->kind() == c10::aten::transpose || node->kind() == c10::aten::permute) {
    node = node->input(0)->node();
  }
  return products.count(node->kind()) > 0;
}

void collectReshapes(torch::jit::Block* block, std::vector<Node*>& found) {
  for (Node* node : block->nodes()) {
    for (torch::jit::Block* sub : node->blocks()) collectReshapes(sub, found);
    const bool reshape = node->kind() == c10::aten::reshape || node->kind() == c10::aten::flatten;
    if (!reshape || node->outputs().size() != 1 || !permutedProduct(node->input(0))) continue;
    auto from = completeCudaTypeWithoutGrad(node->input(0));
    auto to = completeTensorType(node->output());
    if (from && to && reshapeCopies(*from, *to)) found.push_back(node);
  }
}

void copyFirst(Node* reshape) {
  torch::jit::Graph& graph = *reshape->owningGraph();
  torch::jit::WithInsertPoint here(reshape);
  Value* format = graph.insertConstant(static_cast<int64_t>(c10::MemoryFormat::Contiguous));
  Node* copy = graph.insertNode(graph.create(c10::aten::contiguous, {reshape->input(0), format}));
  copy->output()->setType(completeTensorType(reshape->input(0))->contiguous());
  reshape->replaceInput(0, copy->output());
}

}  // namespace

void copyReshapeInputs(GraphPtr& graph) {
  std::vector<Node*> found;
  collectReshapes(graph->block(), found);
  // (None where alias analysis refuses the graph: reshapes stay ATen's.)
  for (Node* reshape : copiesIndistinguishable(graph, found)) copyFirst(reshape);
}

}  // namespace fuser
