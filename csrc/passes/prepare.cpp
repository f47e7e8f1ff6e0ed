// prepareGraph: makes a profiled graph ready for partitioning.
//
// After it runs:
// - no prim::profile node is left; each profiled value carries its profiled type
//   (dtype, device, sizes, strides, requires_grad) as its TensorType;
// - in-place elementwise ops (add_, mul_, relu_, ...) whose functional form is in the
//   fusible table are functional, where alias analysis proves nobody else can observe
//   the write (the mutated tensor is a fresh value no view or input shares) and the
//   functional result has the dtype the in-place op kept. An in-place op on a view, on
//   a graph input or on anything aliased stays in place (and is not fused);
// - `x.to(x.device, dtype, ...)` is `x.to(dtype, ...)`: the Device value, which no
//   kernel can take as an argument, is gone.
#include <torch/csrc/jit/frontend/function_schema_parser.h>
#include <torch/csrc/jit/passes/remove_mutation.h>
#include <torch/csrc/jit/passes/tensorexpr_fuser.h>

#include <unordered_set>

#include "ops/op_table.h"
#include "passes/pipeline.h"

namespace fuser {
namespace {

using torch::jit::Node;

// Operator names of the table's entries, built on first use (after every static
// registration of ops/*.cpp has run).
const std::unordered_set<c10::OperatorName>& fusibleOperatorNames() {
  static const std::unordered_set<c10::OperatorName> names = [] {
    std::unordered_set<c10::OperatorName> out;
    for (const std::string& schema : ops::supportedSchemas()) {
      out.insert(torch::jit::parseSchema(schema).operator_name());
    }
    return out;
  }();
  return names;
}

// `aten::add_.Tensor` -> `aten::add.Tensor`: same overload, name without the `_`.
bool functionalFormIsFusible(const Node* node) {
  const c10::FunctionSchema* schema = node->maybeSchema();
  if (!schema) return false;
  const std::string& name = schema->name();
  if (name.empty() || name.back() != '_') return false;
  c10::OperatorName functional{name.substr(0, name.size() - 1), schema->overload_name()};
  return fusibleOperatorNames().count(functional) > 0;
}

bool isFloating(c10::ScalarType t) { return c10::isFloatingType(t); }

// An in-place op writes into `self`, so its result keeps self's dtype and shape; the
// functional op promotes and broadcasts instead. Accept only cases where both agree:
// a floating self, other tensors of the same dtype and no higher rank, real scalars.
// (Integral self is refused: ops such as div_ or sigmoid_ would turn float.)
bool functionalKeepsDtypeAndShape(const Node* node) {
  auto self = node->input(0)->type()->cast<c10::TensorType>();
  if (!self || !self->scalarType() || !self->dim() || !isFloating(*self->scalarType())) {
    return false;
  }
  for (size_t i = 1; i < node->inputs().size(); ++i) {
    const c10::TypePtr& type = node->input(i)->type();
    if (auto tensor = type->cast<c10::TensorType>()) {
      if (tensor->scalarType() != self->scalarType() || !tensor->dim() ||
          *tensor->dim() > *self->dim()) {
        return false;
      }
    } else if (type->kind() == c10::TypeKind::ComplexType) {
      return false;
    }
  }
  return true;
}

bool shouldMakeFunctional(Node* node) {
  return functionalFormIsFusible(node) && functionalKeepsDtypeAndShape(node);
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

}  // namespace

void prepareGraph(GraphPtr& graph) {
  torch::jit::RemoveProfileNodesAndSpecializeTypes(graph);
  // RemoveTensorMutation runs its own alias analysis: it only rewrites a write whose
  // target is a fresh, unaliased value, which rules out views and graph inputs.
  torch::jit::RemoveTensorMutation(graph, shouldMakeFunctional);
  dropOwnDeviceArguments(graph->block());
}

}  // namespace fuser
