// denseAttentionMasks: an attention mask that CUDA's fused attention kernels refuse for
// its layout is copied to a dense one first.
//
// scaled_dot_product_attention on CUDA runs its flash, memory-efficient or cuDNN kernel
// only where the mask's last dim has stride 1; otherwise it falls back to the math path
// (the scores materialized, scaled, masked, softmaxed and multiplied in a dozen ATen
// kernels, a tenth of the speed). Traced transformers models hand it such a mask: the
// tracer cannot skip an all-true mask as eager does, so a mask broadcast by expand (last
// stride 0) reaches every layer (BERT on the H100: the math path in each of its 12
// layers, eager efficient attention). After this pass each such mask is copied first,
// once per mask value, right after its definition (so the copy dominates every layer
// that reads it): the same values, so the attention computed is the one eager computes.
//
// The copy is `aten::contiguous(mask)`, a group of ours (groups.cpp), where the profiled
// type says the mask is a CUDA tensor of more than one element along its last dim with
// another stride there, and records no gradient. TorchScript profiles no input of
// attention itself, so a mask whose producer's result was not profiled (an aten::expand)
// has no strides in the graph: where the query, key or value is typed as CUDA, such a
// mask goes through fuser::dense_attention_mask instead, which copies it only where the
// tensor itself needs it (runtime/dense_attention_mask_op.cpp; an ATen copy). The CPU's
// fused kernels take such masks as they are.
#include <torch/csrc/jit/ir/ir.h>

#include <c10/core/MemoryFormat.h>

#include <unordered_map>

#include "passes/attention_inputs.h"
#include "passes/pipeline.h"
#include "symbols.h"
#include "value_types.h"

namespace fuser {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// How a mask reaches the fused kernels: as it is, through a row-major copy (its profiled
// type says the kernels refuse it), or through fuser::dense_attention_mask (the graph
// does not say how it is laid out).
enum class MaskCopy { kNone, kContiguous, kDecidedPerCall };

MaskCopy maskCopyFor(const Node* node) {
  if (node->kind() != c10::aten::scaled_dot_product_attention ||
      node->inputs().size() <= kAttentionMaskInput) {
    return MaskCopy::kNone;
  }
  auto type = node->input(kAttentionMaskInput)->type()->cast<c10::TensorType>();
  if (!type) return MaskCopy::kNone;  // no mask
  if (!type->isComplete()) {
    const bool on_cuda =
        isOnCuda(node->input(0)) || isOnCuda(node->input(1)) || isOnCuda(node->input(2));
    return on_cuda ? MaskCopy::kDecidedPerCall : MaskCopy::kNone;
  }
  if (type->requiresGrad().value_or(true) || !type->device()->is_cuda() || *type->dim() == 0) {
    return MaskCopy::kNone;
  }
  const std::vector<int64_t> sizes = *type->sizes().concrete_sizes();
  const std::vector<int64_t> strides = *type->strides().concrete_sizes();
  if (sizes.back() <= 1 || strides.back() == 1) return MaskCopy::kNone;
  return MaskCopy::kContiguous;
}

// The copy of `mask`, made once, after its definition.
Value* maskCopy(Value* mask, MaskCopy how, std::unordered_map<Value*, Value*>& copies) {
  auto found = copies.find(mask);
  if (found != copies.end()) return found->second;
  torch::jit::Graph& graph = *mask->owningGraph();
  torch::jit::WithInsertPoint after(mask->node()->next());
  Node* copy = nullptr;
  if (how == MaskCopy::kContiguous) {
    Value* format = graph.insertConstant(static_cast<int64_t>(c10::MemoryFormat::Contiguous));
    copy = graph.insertNode(graph.create(c10::aten::contiguous, {mask, format}));
    copy->output()->setType(mask->type()->expect<c10::TensorType>()->contiguous());
  } else {
    copy = graph.insertNode(graph.create(denseAttentionMaskSymbol(), {mask}));
    copy->output()->setType(mask->type());
  }
  copies.emplace(mask, copy->output());
  return copy->output();
}

void densifyIn(torch::jit::Block* block, std::unordered_map<Value*, Value*>& copies) {
  for (Node* node : block->nodes()) {
    for (torch::jit::Block* sub : node->blocks()) densifyIn(sub, copies);
    const MaskCopy how = maskCopyFor(node);
    if (how != MaskCopy::kNone) {
      node->replaceInput(kAttentionMaskInput,
                         maskCopy(node->input(kAttentionMaskInput), how, copies));
    }
  }
}

}  // namespace

void denseAttentionMasks(GraphPtr& graph) {
  std::unordered_map<Value*, Value*> copies;
  densifyIn(graph->block(), copies);
}

}  // namespace fuser
