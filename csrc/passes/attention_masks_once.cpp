// convertAttentionMasksOnce: a boolean attention mask read by several layers is converted
// to its additive form once per call, not once per layer.
//
// scaled_dot_product_attention converts a boolean mask to an additive one (0 where true,
// a large negative value where false, in the query's dtype) before its flash,
// memory-efficient or cuDNN kernel, on every call: a full pass over a [B, 1, T, T] mask in
// each layer of a transformers model, which hands the same mask to all of them (GPT-2 and
// Llama traced: 12 of the elementwise kernels left per call on CPU; BERT on the H100, 36
// of 39; with cuDNN attention in float16, 24 of them). After this pass the conversion runs
// once, before the first layer that reads the mask (fuser::additive_attention_mask, handed
// that layer's arguments: the conversion depends on the backend, -inf for flash and
// memory-efficient attention, cuDNN's own finite value for cuDNN), and each layer's
// attention becomes fuser::scaled_dot_product_attention, which is handed both masks and
// the converted one's form, and passes the converted one to ATen only where attention
// would have converted the boolean one to exactly those values: the backend chosen for the
// boolean mask converts to that form, the converted mask chooses the same backend, and it
// has the query's dtype and the mask's sizes. Anywhere else (the math path, another dtype)
// the layer gets the boolean mask, as before. The converted values are the ones attention
// makes, so each layer computes what eager computes, bit for bit
// (runtime/attention_mask_once_ops.cpp).
//
// Masks read by one layer are left (nothing to share), and so are masks whose readers are
// not all in one block (the conversion must come before every one of them) and masks the
// graph types as other than boolean.
#include <torch/csrc/jit/ir/ir.h>

#include <unordered_map>
#include <vector>

#include "passes/attention_inputs.h"
#include "passes/pipeline.h"
#include "symbols.h"

namespace fuser {
namespace {

using torch::jit::Node;
using torch::jit::Value;

bool mayBeBooleanMask(const Value* mask) {
  auto type = mask->type()->cast<c10::TensorType>();
  if (!type) return false;  // None: no mask
  return !type->scalarType() || *type->scalarType() == c10::ScalarType::Bool;
}

// Every attention node in `block` (and the blocks under it) by the mask it reads, in
// node order.
void collectReaders(torch::jit::Block* block,
                    std::unordered_map<Value*, std::vector<Node*>>& readers,
                    std::vector<Value*>& masks) {
  for (Node* node : block->nodes()) {
    for (torch::jit::Block* sub : node->blocks()) collectReaders(sub, readers, masks);
    if (node->kind() != c10::aten::scaled_dot_product_attention ||
        node->inputs().size() != kAttentionInputs ||
        !mayBeBooleanMask(node->input(kAttentionMaskInput))) {
      continue;
    }
    auto& of_mask = readers[node->input(kAttentionMaskInput)];
    if (of_mask.empty()) masks.push_back(node->input(kAttentionMaskInput));
    of_mask.push_back(node);
  }
}

bool allInOneBlock(const std::vector<Node*>& nodes) {
  for (const Node* node : nodes) {
    if (node->owningBlock() != nodes.front()->owningBlock()) return false;
  }
  return true;
}

// `layers` read `mask`, all in one block, in node order.
void convertOnce(Value* mask, const std::vector<Node*>& layers) {
  torch::jit::Graph& graph = *mask->owningGraph();
  Node* first = layers.front();
  Value* additive = nullptr;
  Value* form = nullptr;
  {
    // The conversion takes the first layer's arguments, its mask first: its backend
    // decides the form.
    torch::jit::WithInsertPoint before(first);
    std::vector<Value*> inputs(first->inputs().begin(), first->inputs().end());
    inputs.erase(inputs.begin() + kAttentionMaskInput);
    inputs.insert(inputs.begin(), mask);
    Node* convert = graph.insertNode(graph.create(additiveAttentionMaskSymbol(), inputs, 2));
    convert->copyMetadata(first);
    additive = convert->output(0)->setType(c10::TensorType::get());
    form = convert->output(1)->setType(c10::IntType::get());
  }
  for (Node* layer : layers) {
    torch::jit::WithInsertPoint before(layer);
    std::vector<Value*> inputs(layer->inputs().begin(), layer->inputs().end());
    inputs.insert(inputs.begin() + kAttentionMaskInput + 1, {additive, form});
    Node* attention = graph.insertNode(graph.create(attentionWithAdditiveMaskSymbol(), inputs));
    attention->copyMetadata(layer);
    attention->output()->setType(layer->output()->type());
    layer->output()->replaceAllUsesWith(attention->output());
    layer->destroy();
  }
}

}  // namespace

void convertAttentionMasksOnce(GraphPtr& graph) {
  std::unordered_map<Value*, std::vector<Node*>> readers;
  std::vector<Value*> masks;  // in the order their first readers come, for a stable graph
  collectReaders(graph->block(), readers, masks);
  for (Value* mask : masks) {
    const std::vector<Node*>& layers = readers.at(mask);
    if (layers.size() >= 2 && allInOneBlock(layers)) convertOnce(mask, layers);
  }
}

}  // namespace fuser
