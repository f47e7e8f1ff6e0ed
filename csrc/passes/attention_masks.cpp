// denseAttentionMasks: an attention mask that CUDA's fused attention kernels refuse for
// its layout is copied to a dense one first, which a group takes.
//
// scaled_dot_product_attention on CUDA runs its flash, memory-efficient or cuDNN kernel
// only where the mask's last dim has stride 1; otherwise it falls back to the math path
// (the scores materialized, scaled, masked, softmaxed and multiplied in a dozen ATen
// kernels, a tenth of the speed). Traced transformers models hand it such a mask: the
// tracer cannot skip an all-true mask as eager does, so a mask broadcast by expand (last
// stride 0) reaches every layer (BERT on the H100: the math path in each of its 12
// layers, eager efficient attention). After this pass each such mask is
// `aten::contiguous(mask)` first, once per mask value, right after its definition (so
// the copy dominates every layer that reads it): the same values, so the attention
// computed is the one eager computes, and the copy is a group of ours (groups.cpp).
//
// Only where the profiled type says the mask is a CUDA tensor of more than one element
// along its last dim with another stride there, and records no gradient. The CPU's
// fused kernels take such masks as they are.
#include <torch/csrc/jit/ir/ir.h>

#include <c10/core/MemoryFormat.h>

#include <unordered_map>

#include "passes/pipeline.h"

namespace fuser {
namespace {

using torch::jit::Node;
using torch::jit::Value;

constexpr size_t kMaskInput = 3;  // query, key, value, attn_mask, ...

// The mask's profiled type where the fused kernels would refuse it; null otherwise.
c10::TensorTypePtr refusedMaskType(const Node* node) {
  if (node->kind() != c10::aten::scaled_dot_product_attention ||
      node->inputs().size() <= kMaskInput) {
    return nullptr;
  }
  auto type = node->input(kMaskInput)->type()->cast<c10::TensorType>();
  if (!type || !type->isComplete() || type->requiresGrad().value_or(true) ||
      !type->device()->is_cuda() || *type->dim() == 0) {
    return nullptr;
  }
  const std::vector<int64_t> sizes = *type->sizes().concrete_sizes();
  const std::vector<int64_t> strides = *type->strides().concrete_sizes();
  if (sizes.back() <= 1 || strides.back() == 1) return nullptr;
  return type;
}

// The dense copy of `mask`, made once, after its definition.
Value* denseCopy(Value* mask, const c10::TensorTypePtr& type,
                 std::unordered_map<Value*, Value*>& copies) {
  auto found = copies.find(mask);
  if (found != copies.end()) return found->second;
  torch::jit::Graph& graph = *mask->owningGraph();
  torch::jit::WithInsertPoint after(mask->node()->next());
  Value* format = graph.insertConstant(static_cast<int64_t>(c10::MemoryFormat::Contiguous));
  Node* copy = graph.insertNode(graph.create(c10::aten::contiguous, {mask, format}));
  copy->output()->setType(type->contiguous());
  copies.emplace(mask, copy->output());
  return copy->output();
}

void densifyIn(torch::jit::Block* block, std::unordered_map<Value*, Value*>& copies) {
  for (Node* node : block->nodes()) {
    for (torch::jit::Block* sub : node->blocks()) densifyIn(sub, copies);
    if (auto type = refusedMaskType(node)) {
      node->replaceInput(kMaskInput, denseCopy(node->input(kMaskInput), type, copies));
    }
  }
}

}  // namespace

void denseAttentionMasks(GraphPtr& graph) {
  std::unordered_map<Value*, Value*> copies;
  densifyIn(graph->block(), copies);
}

}  // namespace fuser
