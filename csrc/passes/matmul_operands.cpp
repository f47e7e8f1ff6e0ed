// copyMatmulOperands: batched matmul operands that ATen would copy are copied by an
// explicit aten::contiguous, which a group takes.
//
// ATen's matmul of two tensors of 3 or more dims views each as [batch, rows, cols]; where
// an operand's batch dims do not merge into one stride (attention's q, k and v: one
// projection split into heads, [B, T, heads, d] transposed to [B, heads, T, d]) that
// reshape copies it with a strided elementwise copy (a third of the H100's bandwidth on a
// GPT-2 block). After this pass each such operand is `aten::contiguous(x)` first: the
// same copy, made explicit, so a group takes it (a copy kernel of 16-byte accesses, or
// the group computing the operand, as an autocast cast), and the reshape is then a view.
// cuBLAS reads the same values in the same layout, so the product is eager's.
//
// Only where the profiled types say ATen copies: both operands have 3 or more dims and
// equal batch sizes (broadcast batches expand first, another copy), the operand's batch
// dims do not merge, and it records no gradient (autodiff's graphs keep their values).
// CUDA only: there a strided copy stays a group of its own (groups.cpp); on the CPU it
// would be dissolved again, and oneDNN Graph, which runs after us, reads strided matmul
// operands itself.
#include <torch/csrc/jit/ir/ir.h>

#include <c10/core/MemoryFormat.h>

#include <optional>
#include <vector>

#include "passes/fusibility.h"
#include "passes/pipeline.h"

namespace fuser {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// Whether the dims before the last two of `t` view as one dim: every pair of adjacent
// non-1 batch dims has outer stride = inner stride * inner size.
bool batchDimsMerge(const c10::TensorType& t) {
  const std::vector<int64_t> sizes = *t.sizes().concrete_sizes();
  const std::vector<int64_t> strides = *t.strides().concrete_sizes();
  const size_t batch = sizes.size() - 2;
  std::optional<size_t> inner;  // the last non-1 batch dim seen, walking outwards
  for (size_t d = batch; d-- > 0;) {
    if (sizes[d] == 1) continue;
    if (inner && strides[d] != strides[*inner] * sizes[*inner]) return false;
    inner = d;
  }
  return true;
}

std::vector<int64_t> batchSizes(const c10::TensorType& t) {
  std::vector<int64_t> sizes = *t.sizes().concrete_sizes();
  sizes.resize(sizes.size() - 2);
  return sizes;
}

void copyIn(torch::jit::Block* block) {
  for (Node* node : block->nodes()) {
    for (torch::jit::Block* sub : node->blocks()) copyIn(sub);
    if (node->kind() != c10::aten::matmul || node->inputs().size() != 2) continue;
    auto a = completeCudaTypeWithoutGrad(node->input(0));
    auto b = completeCudaTypeWithoutGrad(node->input(1));
    if (!a || !b || *a->dim() < 3 || *b->dim() < 3 || batchSizes(*a) != batchSizes(*b)) continue;
    for (size_t i = 0; i < 2; ++i) {
      const auto& type = i == 0 ? a : b;
      if (batchDimsMerge(*type)) continue;
      torch::jit::Graph& graph = *node->owningGraph();
      torch::jit::WithInsertPoint here(node);
      Value* format = graph.insertConstant(static_cast<int64_t>(c10::MemoryFormat::Contiguous));
      Node* copy = graph.insertNode(graph.create(c10::aten::contiguous, {node->input(i), format}));
      copy->output()->setType(type->contiguous());
      node->replaceInput(i, copy->output());
    }
  }
}

}  // namespace

void copyMatmulOperands(GraphPtr& graph) { copyIn(graph->block()); }

}  // namespace fuser
