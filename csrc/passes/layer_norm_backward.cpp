// splitLayerNormBackward: layer_norm's input gradient becomes an op of its own, which a
// row group fuses with the gradients around it.
//
// After it runs, each aten::native_layer_norm_backward (autodiff's backward of
// layer_norm) whose constant output_mask asks for the input gradient, where a fusible
// node is beside it (the producer of its incoming gradient, or a reader of the input
// gradient), computes that gradient as
//   fuser::layer_norm_input_grad(grad_out, input, normalized_shape, mean, rstd, weight)
// (symbols.h; a row reduction, ops/reductions.cpp), and the weight and bias gradients,
// where something reads them, with the same aten op given output_mask [False, weight,
// bias]. Those two are sums over the rows, along the leading dims, which no row kernel
// takes: ATen's kernel computes them. Eager's CUDA op runs the two parts as two kernels
// as well; the input gradient now shares its passes with the residual sum before it or
// the activation's gradient after it.
// Left alone: a mask that is not a constant, an input gradient nobody reads, and an op
// with no fusible neighbour (ATen's CPU kernel computes the three gradients in one walk
// over the rows, which two calls would read twice).
#include <ATen/ATen.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/runtime/custom_operator.h>

#include "passes/fusibility.h"
#include "passes/pipeline.h"
#include "symbols.h"

namespace fuser {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight,
// bias, output_mask).
constexpr size_t kOutputMask = 7;

bool hasFusibleNeighbour(const Node* grad) {
  if (checkFusible(grad->input(0)->node())) return true;
  for (const torch::jit::Use& use : grad->output()->uses()) {
    if (checkFusible(use.user) && !readsFromOutsideItsGroup(use.user, use.offset)) return true;
  }
  return false;
}

void splitIn(torch::jit::Block* block) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* node = *it++;
    for (torch::jit::Block* sub : node->blocks()) splitIn(sub);
    if (node->kind() != c10::aten::native_layer_norm_backward || node->inputs().size() != 8) {
      continue;
    }
    std::optional<c10::IValue> mask = torch::jit::toIValue(node->input(kOutputMask));
    if (!mask || !mask->isBoolList()) continue;
    const c10::List<bool> asked = mask->toBoolList();
    if (asked.size() != 3 || !asked.get(0) || !node->output(0)->hasUses()) continue;
    torch::jit::Graph& graph = *node->owningGraph();
    torch::jit::WithInsertPoint here(node);
    Node* grad = graph.insertNode(graph.create(
        layerNormInputGradSymbol(),
        {node->input(0), node->input(1), node->input(2), node->input(3), node->input(4),
         node->input(5)}));
    grad->output()->copyMetadata(node->output(0));
    node->output(0)->replaceAllUsesWith(grad->output());
    if (!checkFusible(grad) || !hasFusibleNeighbour(grad)) {
      grad->output()->replaceAllUsesWith(node->output(0));
      grad->destroy();
      continue;
    }
    if (!node->output(1)->hasUses() && !node->output(2)->hasUses()) {
      node->destroy();
      continue;
    }
    Value* rest = graph.insertConstant(c10::List<bool>({false, asked.get(1), asked.get(2)}));
    node->replaceInput(kOutputMask, rest);
  }
}

// What the interpreter runs where no kernel does (a fallback graph, a group that could
// not compile): ATen's op for the input gradient alone.
void layerNormInputGrad(torch::jit::Stack& stack) {
  const std::optional<at::Tensor> weight = torch::jit::pop(stack).toOptional<at::Tensor>();
  const at::Tensor rstd = torch::jit::pop(stack).toTensor();
  const at::Tensor mean = torch::jit::pop(stack).toTensor();
  const std::vector<int64_t> shape = torch::jit::pop(stack).toIntVector();
  const at::Tensor input = torch::jit::pop(stack).toTensor();
  const at::Tensor grad_out = torch::jit::pop(stack).toTensor();
  auto grads = at::native_layer_norm_backward(grad_out, input, shape, mean, rstd, weight,
                                              std::nullopt, {true, false, false});
  torch::jit::push(stack, std::get<0>(grads));
}

torch::jit::RegisterOperators registration({
    torch::jit::Operator("fuser::layer_norm_input_grad(Tensor grad_out, Tensor input, int[] "
                         "normalized_shape, Tensor mean, Tensor rstd, Tensor? weight) -> Tensor",
                         layerNormInputGrad, c10::AliasAnalysisKind::FROM_SCHEMA),
});

}  // namespace

void splitLayerNormBackward(GraphPtr& graph) { splitIn(graph->block()); }

}  // namespace fuser
