// prepareGraph: makes a profiled graph ready for partitioning.
//
// After it runs:
// - no prim::profile node is left; each profiled value carries its profiled type
//   (dtype, device, sizes, strides, requires_grad) as its TensorType;
// - a table op's result that profiling did not see has the dtype, device and rank its
//   operands imply (type_propagation.cpp);
// - in-place variants of table ops (add_, mul_, relu_, +=, ...) are functional where
//   alias analysis proves nobody else can observe the write, with the dtype and shape
//   the in-place op kept (inplace.cpp). An in-place op on a view, on a graph input or
//   on anything aliased stays in place (and is not fused), with its reason;
// - a 0-dim CPU tensor constant read by a table op (torch.jit.trace's numbers) is a
//   number, where eager's result is the same either way;
// - `x.to(x.device, dtype, ...)` is `x.to(dtype, ...)`: the Device value, which no
//   kernel can take as an argument, is gone;
// - aten::dropout that eager answers with its input itself (train False, or p 0) is
//   gone: a frozen model in eval mode keeps no dropout between its groups;
// - autodiff's native_dropout of a constant p 0 has train False: it keeps every
//   element either way (a mask of ones, the output the input times 1), and in eval
//   mode no mask is drawn;
// - autodiff's gradient sums, and elementwise values computed from them, have the
//   strides the optimized graph gives them (gradient_sums.cpp).
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/tensorexpr_fuser.h>

#include <optional>
#include <vector>

#include "ops/op_table.h"
#include "passes/gradient_sums.h"
#include "passes/inplace.h"
#include "passes/pipeline.h"
#include "passes/type_propagation.h"

namespace fuser {
namespace {

using torch::jit::Node;

// A number for `v` where `v` is a 0-dim CPU tensor constant and eager's result does not
// depend on the difference: promotion treats a 0-dim tensor and a wrapped number alike
// when every other tensor operand has a dimension, and a floating constant is the
// same as a number only beside floating tensors (int + 0-dim double is double, int +
// 1.0 is float).
std::optional<c10::IValue> numberFor(const torch::jit::Value* v, const Node* node) {
  if (v->node()->kind() != c10::prim::Constant) return std::nullopt;
  std::optional<c10::IValue> iv = torch::jit::toIValue(v);
  if (!iv || !iv->isTensor()) return std::nullopt;
  const at::Tensor& t = iv->toTensor();
  if (t.dim() != 0 || !t.device().is_cpu() || t.requires_grad()) return std::nullopt;
  const bool floating = t.scalar_type() == c10::kDouble || t.scalar_type() == c10::kFloat;
  if (!floating && t.scalar_type() != c10::kLong && t.scalar_type() != c10::kInt) {
    return std::nullopt;
  }
  for (const torch::jit::Value* in : node->inputs()) {
    if (in == v || in->node()->kind() == c10::prim::Constant) continue;
    auto type = in->type()->cast<c10::TensorType>();
    if (!type) continue;
    if (!type->dim() || *type->dim() == 0 || !type->scalarType()) return std::nullopt;
    if (floating && !c10::isFloatingType(*type->scalarType())) return std::nullopt;
  }
  return floating ? c10::IValue(t.item<double>()) : c10::IValue(t.item<int64_t>());
}

// torch.jit.trace records Python numbers as 0-dim tensor constants, which kernels do
// not take; a table op (or its in-place variant) reading one reads the number instead,
// through its Scalar overload, where that gives eager's result and is in the table.
void constantTensorsToNumbers(torch::jit::Block* block) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* node = *it++;
    for (torch::jit::Block* sub : node->blocks()) constantTensorsToNumbers(sub);
    if (node->outputs().size() != 1 || (!ops::findOp(node) && !functionalEntryOf(node))) continue;
    std::vector<torch::jit::Value*> inputs(node->inputs().begin(), node->inputs().end());
    bool changed = false;
    for (size_t i = 1; i < inputs.size(); ++i) {
      if (std::optional<c10::IValue> number = numberFor(inputs[i], node)) {
        torch::jit::WithInsertPoint guard(node);
        inputs[i] = block->owningGraph()->insertConstant(*number);
        changed = true;
      }
    }
    if (!changed) continue;
    Node* scalar = block->owningGraph()->create(node->kind(), inputs, 1);
    scalar->insertBefore(node);
    if (!scalar->maybeSchema() || (!ops::findOp(scalar) && !functionalEntryOf(scalar))) {
      scalar->destroy();  // no Scalar overload we fuse: keep the tensor (unused numbers go in DCE)
      continue;
    }
    scalar->copyMetadata(node);
    scalar->output()->copyMetadata(node->output());
    node->output()->replaceAllUsesWith(scalar->output());
    node->destroy();
  }
}

// aten::to.device whose device is prim::device(self) only changes the dtype.
void dropOwnDeviceArguments(torch::jit::Block* block) {
  static const c10::Symbol to = c10::Symbol::fromQualString("aten::to");
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* node = *it++;
    for (torch::jit::Block* sub : node->blocks()) dropOwnDeviceArguments(sub);
    if (node->kind() != to || node->inputs().size() != 6) continue;
    const c10::FunctionSchema* schema = node->maybeSchema();
    if (!schema || schema->overload_name() != "device") continue;
    const torch::jit::Value* device = node->input(1);
    if (device->node()->kind() != c10::prim::device ||
        device->node()->input() != node->input(0)) {
      continue;
    }
    // (self, dtype, non_blocking, copy, memory_format) matches aten::to.dtype.
    Node* dtype_only = block->owningGraph()->create(
        to, {node->input(0), node->input(2), node->input(3), node->input(4), node->input(5)});
    dtype_only->insertBefore(node);
    dtype_only->output()->copyMetadata(node->output());
    node->output()->replaceAllUsesWith(dtype_only->output());
    node->destroy();
  }
}

// Eager's aten::dropout returns `input` itself when train is False or p is 0 (after
// checking p, so p must be a constant in [0, 1]).
void dropIdentityDropouts(torch::jit::Block* block) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* node = *it++;
    for (torch::jit::Block* sub : node->blocks()) dropIdentityDropouts(sub);
    if (node->kind() != c10::aten::dropout || node->inputs().size() != 3) continue;
    auto p = torch::jit::toIValue(node->input(1));
    auto train = torch::jit::toIValue(node->input(2));
    if (!p || !p->isDouble()) continue;
    const double prob = p->toDouble();
    // p 0 keeps every element whatever train is (a module's self.training, say).
    const bool eval = train && train->isBool() && !train->toBool();
    if (!(prob >= 0 && prob <= 1) || (prob != 0 && !eval)) continue;
    node->output()->replaceAllUsesWith(node->input(0));
    node->destroy();
  }
}

// native_dropout(x, 0, train) keeps every element whatever train says: with train
// False its mask is ones and its output the input, and no random mask is drawn.
void settleZeroProbabilityDropouts(torch::jit::Block* block) {
  for (Node* node : block->nodes()) {
    for (torch::jit::Block* sub : node->blocks()) settleZeroProbabilityDropouts(sub);
    if (node->kind() != c10::aten::native_dropout || node->inputs().size() != 3) continue;
    auto p = torch::jit::toIValue(node->input(1));
    if (!p || !p->isDouble() || p->toDouble() != 0) continue;
    torch::jit::WithInsertPoint before(node);
    node->replaceInput(2, block->owningGraph()->insertConstant(false));
  }
}

}  // namespace

void prepareGraph(GraphPtr& graph) {
  torch::jit::RemoveProfileNodesAndSpecializeTypes(graph);
  layGradientSumsOutAsTheyRun(graph);  // gradient_sums.cpp: strides as the sums run
  completeTypesFromInputs(graph);    // type_propagation.cpp: values profiling missed
  constantTensorsToNumbers(graph->block());
  makeInPlaceOpsFunctional(graph);   // inplace.cpp
  dropOwnDeviceArguments(graph->block());
  dropIdentityDropouts(graph->block());
  settleZeroProbabilityDropouts(graph->block());
  completeTypesFromInputs(graph);    // and values the rewrites made
}

}  // namespace fuser
