// splitLayerNormBackward: layer_norm's input gradient becomes an op of its own, which a
// row group fuses with the gradients around it.
//
// After it runs, each aten::native_layer_norm_backward (autodiff's backward of
// layer_norm) whose constant output_mask asks for the input gradient, where a fusible
// node is beside it (the producer of its incoming gradient, or a reader of the input
// gradient), computes that gradient as
//   fuser::layer_norm_input_grad(grad_out, input, normalized_shape, mean, rstd, weight)
// (symbols.h; a row reduction, ops/reductions.cpp), and the weight and bias gradients,
// where something reads them, as the sums over the leading dims that they are:
//   grad_bias   = sum(grad_out, leading, keepdim).reshape(normalized_shape)
//   grad_weight = sum(grad_out * ((input - mean) * rstd), leading, keepdim)
//                   [.to(weight's dtype)].reshape(normalized_shape)
// which one column group computes (two sums over one tensor's dims), in float for a
// 16-bit input (as eager's kernels compute: CUDA's statistics are float already, the
// CPU's 16-bit ones are widened first, so that nothing rounds before the sum) and
// rounded once. On 2 CPU cores, [8192, 768], ms: float32 1.33 against ATen's op's 1.98,
// bfloat16 1.15 against 2.94, float16 1.79 against 2.29, float64 2.71 against 5.16.
// normalized_shape may be an input list where the weight has known sizes (eager
// requires them equal; the guard pins the list to them): nanoGPT's
// `F.layer_norm(x, self.weight.shape, w, b)` hands its backward the list it computed.
// Elsewhere (dtypes that differ; no leading dim; statistics not shaped as the forward
// returns them; a gradient read that the mask leaves out; FUSER_GRADIENT_SUMS=0), the
// same aten op computes them given output_mask [False, weight, bias]. Eager's CUDA op
// runs the two parts as two kernels as well; the input gradient now shares its passes
// with the residual sum before it or the activation's gradient after it.
// Left alone: a mask that is not a constant, an input gradient nobody reads, and an op
// with no fusible neighbour (ATen's CPU kernel computes the three gradients in one walk
// over the rows, which two calls would read twice).
#include <ATen/ATen.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/runtime/custom_operator.h>

#include "config.h"
#include "passes/fusibility.h"
#include "passes/pipeline.h"
#include "symbols.h"
#include "value_types.h"

namespace fuser {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight,
// bias, output_mask).
constexpr size_t kOutputMask = 7;

// The dims before the normalized ones, when the node's types and normalized_shape say
// how many, and its weight and bias gradients may be summed as graph ops (see above):
// only gradients the mask asks for are read (eager gives undefined tensors for the
// others), and the bias is of the weight's dtype where its gradient is read.
std::optional<int64_t> leadingDimsToSum(const Node* node, const c10::List<bool>& asked) {
  for (size_t i : {1, 2}) {
    if (node->output(i)->hasUses() && !asked.get(i)) return std::nullopt;
  }
  auto grad = tensorTypeOf(node->input(0)), input = tensorTypeOf(node->input(1));
  auto mean = tensorTypeOf(node->input(3)), rstd = tensorTypeOf(node->input(4));
  auto weight = tensorTypeOf(node->input(5)), bias = tensorTypeOf(node->input(6));
  if (!grad || !input || !mean || !rstd || !weight) return std::nullopt;
  // normalized_shape: a constant, or (nanoGPT's `F.layer_norm(x, self.weight.shape, ...)`
  // gives the backward a list input) the weight's sizes, which eager requires it to be.
  std::optional<std::vector<int64_t>> shape = weight->sizes().concrete_sizes();
  if (auto constant = torch::jit::toIValue(node->input(2))) {
    if (!constant->isIntList()) return std::nullopt;
    shape = constant->toIntVector();
  }
  if (!shape) return std::nullopt;
  for (const auto& t : {grad, input, mean, rstd, weight}) {
    if (!t->scalarType() || !t->device() || !t->dim()) return std::nullopt;
  }
  const c10::ScalarType dtype = *input->scalarType();
  if (*grad->scalarType() != dtype || *weight->scalarType() != dtype ||
      *mean->scalarType() != *rstd->scalarType()) {
    return std::nullopt;
  }
  if (!c10::isFloatingType(dtype)) return std::nullopt;
  if (node->output(2)->hasUses() && (!bias || bias->scalarType() != dtype)) {
    return std::nullopt;
  }
  const int64_t leading =
      static_cast<int64_t>(*input->dim()) - static_cast<int64_t>(shape->size());
  if (leading < 1 || *grad->dim() != *input->dim()) return std::nullopt;
  // The statistics broadcast along the rows only as native_layer_norm returns them: the
  // input's leading sizes, then 1s (eager's backward also reads them flat, one per row).
  auto rows = input->sizes().concrete_sizes();
  if (!rows) return std::nullopt;
  for (int64_t d = leading; d < static_cast<int64_t>(rows->size()); ++d) (*rows)[d] = 1;
  for (const auto& t : {mean, rstd}) {
    if (t->sizes().concrete_sizes() != rows) return std::nullopt;
  }
  return leading;
}

// Whether a tensor of `type` may hold two elements at one offset (a stride of 0 over a
// dim of more than one element), or its strides are unknown.
bool overlapping(const c10::TensorTypePtr& type) {
  auto sizes = type->sizes().concrete_sizes();
  auto strides = type->strides().concrete_sizes();
  if (!sizes || !strides) return true;
  for (size_t d = 0; d < sizes->size(); ++d) {
    if ((*sizes)[d] > 1 && (*strides)[d] == 0) return true;
  }
  return false;
}

// v (of type `type`) converted to `dtype` by the aten::to a group takes.
Value* converted(torch::jit::Graph& graph, Value* v, const c10::TensorTypePtr& type,
                 c10::ScalarType dtype) {
  Value* none = graph.insertConstant(c10::IValue());
  Node* cast = graph.insertNode(graph.create(
      c10::aten::to, {v, graph.insertConstant(static_cast<int64_t>(dtype)),
                      graph.insertConstant(false), graph.insertConstant(false), none}));
  cast->output()->setType(type->withScalarType(dtype));
  return cast->output();
}

// sum(v, [0, leading), keepdim=True), converted to `dtype` where v has another, reshaped
// to `shape`: a gradient of the weight or the bias.
Value* leadingSum(torch::jit::Graph& graph, Value* v, int64_t leading, c10::ScalarType dtype,
                  Value* shape) {
  auto type = tensorTypeOf(v);
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < leading; ++d) dims.push_back(d);
  Value* none = graph.insertConstant(c10::IValue());
  Node* sum = graph.insertNode(graph.create(
      c10::aten::sum, {v, graph.insertConstant(dims), graph.insertConstant(true), none}));
  // The summed value's type: v's, with the leading dims of size 1.
  c10::TensorTypePtr summed = type;
  if (auto sizes = type->sizes().concrete_sizes()) {
    for (int64_t d = 0; d < leading; ++d) (*sizes)[d] = 1;
    summed = type->withSizes(*sizes);
  }
  sum->output()->setType(summed);
  Value* result = sum->output();
  if (*type->scalarType() != dtype) result = converted(graph, result, summed, dtype);
  Node* reshape = graph.insertNode(graph.create(c10::aten::reshape, {result, shape}));
  reshape->output()->setType(c10::TensorType::get());
  return reshape->output();
}

// `v` converted to float where it is 16-bit, else `v`.
Value* widened(torch::jit::Graph& graph, Value* v) {
  auto type = tensorTypeOf(v);
  if (!c10::isReducedFloatingType(*type->scalarType())) return v;
  return converted(graph, v, type, c10::kFloat);
}

// The weight's and the bias's gradients of `node` as column sums (where asked and
// possible); returns whether the node has no reader left for them.
bool sumWeightAndBiasGradients(Node* node, const c10::List<bool>& asked) {
  if (!config().gradient_sums) return false;  // FUSER_GRADIENT_SUMS=0
  auto leading = leadingDimsToSum(node, asked);
  if (!leading) return false;
  torch::jit::Graph& graph = *node->owningGraph();
  torch::jit::WithInsertPoint here(node);
  Value* grad = node->input(0);
  const c10::ScalarType dtype = *tensorTypeOf(node->input(5))->scalarType();
  if (node->output(2)->hasUses()) {
    Value* bias_grad = leadingSum(graph, grad, *leading, dtype, node->input(2));
    bias_grad->copyMetadata(node->output(2));
    node->output(2)->replaceAllUsesWith(bias_grad);
  }
  if (node->output(1)->hasUses()) {
    auto input = tensorTypeOf(node->input(1));
    auto grad_type = tensorTypeOf(grad);
    // 16-bit statistics (the CPU's) widened to float: the input and the gradient follow
    // by promotion, and no op of the product rounds to 16 bits.
    Value* mean = widened(graph, node->input(3));
    Value* rstd = widened(graph, node->input(4));
    const c10::ScalarType t =
        c10::promoteTypes(*input->scalarType(), *tensorTypeOf(mean)->scalarType());
    Value* one = graph.insertConstant(static_cast<int64_t>(1));
    Node* centred = graph.insertNode(graph.create(c10::aten::sub, {node->input(1), mean, one}));
    centred->output()->setType(input->withScalarType(t));
    Node* normalized = graph.insertNode(graph.create(c10::aten::mul, {centred->output(), rstd}));
    normalized->output()->setType(input->withScalarType(t));
    Node* product = graph.insertNode(graph.create(c10::aten::mul, {grad, normalized->output()}));
    // The product's layout: the gradient's, unless that overlaps (an expanded gradient,
    // from a sum's backward): then the input's, dense as eager's product is.
    const c10::TensorTypePtr& layout = overlapping(grad_type) ? input : grad_type;
    product->output()->setType(
        layout->withScalarType(c10::promoteTypes(*grad_type->scalarType(), t)));
    Value* weight_grad = leadingSum(graph, product->output(), *leading, dtype, node->input(2));
    weight_grad->copyMetadata(node->output(1));
    node->output(1)->replaceAllUsesWith(weight_grad);
  }
  return true;
}

bool hasFusibleNeighbour(const Node* grad) {
  if (checkFusible(grad->input(0)->node())) return true;
  for (const torch::jit::Use& use : grad->output()->uses()) {
    if (checkFusible(use.user) && !readsFromOutsideItsGroup(use.user, use.offset)) return true;
  }
  return false;
}

void splitBackwardsIn(torch::jit::Block* block) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* node = *it++;
    for (torch::jit::Block* sub : node->blocks()) splitBackwardsIn(sub);
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
    if (sumWeightAndBiasGradients(node, asked) ||
        (!node->output(1)->hasUses() && !node->output(2)->hasUses())) {
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

torch::jit::RegisterOperators layerNormBackwardRegistration({
    torch::jit::Operator("fuser::layer_norm_input_grad(Tensor grad_out, Tensor input, int[] "
                         "normalized_shape, Tensor mean, Tensor rstd, Tensor? weight) -> Tensor",
                         layerNormInputGrad, c10::AliasAnalysisKind::FROM_SCHEMA),
});

}  // namespace

void splitLayerNormBackward(GraphPtr& graph) { splitBackwardsIn(graph->block()); }

}  // namespace fuser
