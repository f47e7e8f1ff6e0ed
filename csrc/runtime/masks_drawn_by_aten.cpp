#include "runtime/masks_drawn_by_aten.h"

#include "symbols.h"

namespace fuser::runtime {

std::vector<size_t> philoxOffsetInputs(const torch::jit::Graph& subgraph) {
  constexpr size_t kOffset = 3;  // input, p, seed, offset, scale_in_input_dtype
  std::vector<size_t> offsets;
  for (const torch::jit::Node* node : subgraph.nodes()) {
    if (node->kind() != philoxDropoutSymbol()) continue;
    const torch::jit::Value* offset = node->input(kOffset);
    if (offset->node()->kind() == c10::prim::Param) offsets.push_back(offset->offset());
  }
  return offsets;
}

bool masksDrawnByAten(const torch::jit::Stack& stack, size_t num_inputs,
                      const std::vector<size_t>& offset_inputs) {
  const size_t first = stack.size() - num_inputs;
  for (size_t i : offset_inputs) {
    const c10::IValue& v = stack[first + i];
    if (v.isInt() && v.toInt() == kMaskDrawnByAten) return true;
  }
  return false;
}

}  // namespace fuser::runtime
