// writeMatmulsPermuted: on CPU, `matmul(a, b).transpose(i, j).contiguous()` (or a
// permute) becomes fuser::matmul_permuted(a, b, dims), which writes the product straight
// into the contiguous permuted layout (runtime/matmul_permuted_op.cpp).
//
// Hand-written attention merges its heads back this way: `(att @ v).transpose(1, 2)
// .contiguous().view(B, T, C)` (nanoGPT, GPT-2, BERT's permute). Eager copies the
// product with ATen's strided copy, an elementwise kernel no group can take (its producer
// is a GEMM, its consumer another); the GEMM can as well write each [T, D] matrix with
// the buffer's row stride. The values are the same products.
//
// Only where the profiled types say so: the product and the permuted view each have one
// use (nothing else sees the product's layout), the permutation keeps the last dim last
// (the GEMM's rows stay rows), and the matmul is a CPU floating one of operands with 2 or
// more dims in one dtype that records no gradient. Left alone where oneDNN Graph, which
// runs after us, would fuse the permute or the copy with the matmul (its attention
// patterns). CUDA keeps the copy, which a group takes there (matmul_operands.cpp).
#include <torch/csrc/jit/ir/ir.h>

#include <c10/core/MemoryFormat.h>

#include <numeric>
#include <optional>
#include <vector>

#include "passes/fusibility.h"
#include "passes/onednn_beside.h"
#include "passes/pipeline.h"
#include "symbols.h"

namespace fuser {
namespace {

using torch::jit::Node;
using torch::jit::Value;

c10::TensorTypePtr cpuFloatingType(const Value* v) {
  auto type = completeTensorType(v);
  if (!type || type->requiresGrad().value_or(true) || !type->device()->is_cpu() ||
      !type->scalarType() || !c10::isFloatingType(*type->scalarType())) {
    return nullptr;
  }
  return type;
}

// The permutation `node` (aten::transpose or aten::permute of a tensor of `rank` dims)
// applies, from constant arguments; nullopt for anything else.
std::optional<std::vector<int64_t>> permutationOf(const Node* node, int64_t rank) {
  std::vector<int64_t> dims(rank);
  std::iota(dims.begin(), dims.end(), 0);
  if (node->kind() == c10::aten::transpose && node->inputs().size() == 3) {
    auto i = torch::jit::constant_as<int64_t>(node->input(1));
    auto j = torch::jit::constant_as<int64_t>(node->input(2));
    if (!i || !j) return std::nullopt;
    const int64_t a = *i < 0 ? *i + rank : *i;
    const int64_t b = *j < 0 ? *j + rank : *j;
    if (a < 0 || a >= rank || b < 0 || b >= rank) return std::nullopt;
    std::swap(dims[a], dims[b]);
    return dims;
  }
  if (node->kind() == c10::aten::permute && node->inputs().size() == 2) {
    auto given = torch::jit::constant_as<c10::List<int64_t>>(node->input(1));
    if (!given || static_cast<int64_t>(given->size()) != rank) return std::nullopt;
    std::vector<bool> seen(rank, false);
    for (int64_t d = 0; d < rank; ++d) {
      int64_t from = given->get(d);
      if (from < 0) from += rank;
      if (from < 0 || from >= rank || seen[from]) return std::nullopt;
      seen[from] = true;
      dims[d] = from;
    }
    return dims;
  }
  return std::nullopt;
}

bool isRowMajorContiguous(const Node* node) {
  if (node->kind() != c10::aten::contiguous || node->inputs().size() != 2) return false;
  auto format = torch::jit::constant_as<int64_t>(node->input(1));
  return format && *format == static_cast<int64_t>(c10::MemoryFormat::Contiguous);
}

// The matmul behind `copy` (contiguous of a permute of a matmul), with the permutation,
// where the rewrite applies.
std::optional<std::pair<Node*, std::vector<int64_t>>> permutedMatmul(Node* copy) {
  if (!isRowMajorContiguous(copy) || isLeftToOneDnn(copy)) return std::nullopt;
  Node* permute = copy->input(0)->node();
  if (copy->input(0)->uses().size() != 1 || isLeftToOneDnn(permute)) return std::nullopt;
  Node* matmul = permute->input(0)->node();
  if (matmul->kind() != c10::aten::matmul || matmul->inputs().size() != 2 ||
      matmul->output()->uses().size() != 1) {
    return std::nullopt;
  }
  auto product = cpuFloatingType(matmul->output());
  auto a = cpuFloatingType(matmul->input(0));
  auto b = cpuFloatingType(matmul->input(1));
  if (!product || !a || !b || *a->dim() < 2 || *b->dim() < 2 ||
      a->scalarType() != b->scalarType() || product->scalarType() != a->scalarType() ||
      !cpuFloatingType(copy->output())) {
    return std::nullopt;
  }
  const int64_t rank = static_cast<int64_t>(*product->dim());
  auto dims = permutationOf(permute, rank);
  if (!dims || dims->back() != rank - 1) return std::nullopt;
  return std::make_pair(matmul, *dims);
}

void rewriteIn(torch::jit::Block* block) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* copy = *it++;
    for (torch::jit::Block* sub : copy->blocks()) rewriteIn(sub);
    auto found = permutedMatmul(copy);
    if (!found) continue;
    auto& [matmul, dims] = *found;
    torch::jit::Graph& graph = *copy->owningGraph();
    torch::jit::WithInsertPoint here(copy);
    Value* dims_value = graph.insertConstant(c10::IValue(dims));
    Node* fused = graph.insertNode(graph.create(
        matmulPermutedSymbol(), {matmul->input(0), matmul->input(1), dims_value}));
    fused->output()->setType(copy->output()->type());
    fused->output()->copyMetadata(copy->output());
    Node* permute = copy->input(0)->node();
    copy->output()->replaceAllUsesWith(fused->output());
    copy->destroy();
    permute->destroy();
    matmul->destroy();
  }
}

}  // namespace

void writeMatmulsPermuted(GraphPtr& graph) { rewriteIn(graph->block()); }

}  // namespace fuser
