// completeTypesFromInputs: a value the rewrites created, or one that profiling missed
// (no prim::profile read it), has no dtype, device or rank; fusibility would refuse it.
//
// After it runs, in the graph block and every sub-block, each single-output node whose
// output tensor type lacks dtype, device or rank, and whose tensor operands all have
// them, has a result type computed from its operands:
// - a table op: dtype by the table entry's own promotion rule (what the kernel will
//   compute), device of its operands, rank and (where every operand's sizes are
//   known) sizes by broadcasting; strides stay unknown;
// - an in-place variant of a table op: its operand `self`'s type (the op returns self).
// Nodes are visited in order, so a chain of such values is typed from its first
// profiled operands. Profiled types are never changed.
#include "passes/type_propagation.h"
#include "value_types.h"

#include <algorithm>
#include <vector>

#include "codegen/kernel_ir.h"
#include "codegen/lowering.h"
#include "ops/batch_norm.h"
#include "passes/fusibility.h"
#include "passes/pipeline.h"

namespace fuser {
namespace {

using torch::jit::Node;
using torch::jit::Value;

bool hasDtypeDeviceRank(const c10::TensorTypePtr& t) {
  return t && t->scalarType() && t->device() && t->dim();
}

// Ops whose result takes its shape from `self` alone (type_as's other tensor gives a
// dtype; batch_norm's others are per channel).
bool shapeFromSelfOnly(const Node* node) {
  return node->kind() == c10::aten::type_as || node->kind() == c10::aten::to ||
         ops::isBatchNorm(node);
}

// Broadcast sizes of `types`, or an unsized shape of the highest rank when some size
// is unknown.
c10::VaryingShape<int64_t> broadcastSizes(const std::vector<c10::TensorTypePtr>& types) {
  size_t rank = 0;
  for (const auto& t : types) rank = std::max(rank, *t->dim());
  std::vector<int64_t> sizes(rank, 1);
  for (const auto& t : types) {
    auto concrete = t->sizes().concrete_sizes();
    if (!concrete) return c10::VaryingShape<int64_t>(rank);
    const size_t offset = rank - concrete->size();
    for (size_t d = 0; d < concrete->size(); ++d) {
      const int64_t s = (*concrete)[d];
      int64_t& out = sizes[offset + d];
      if (s != 1) {
        if (out != 1 && out != s) return c10::VaryingShape<int64_t>(rank);
        out = s;
      }
    }
  }
  return c10::VaryingShape<int64_t>(sizes);
}

std::optional<c10::TensorTypePtr> resultTypeOfTableOp(const ops::OpEntry& entry, const Node* node) {
  std::vector<c10::TensorTypePtr> operands;
  for (const Value* in : node->inputs()) {
    if (auto t = tensorTypeOf(in)) {
      if (!hasDtypeDeviceRank(t)) return std::nullopt;
      operands.push_back(t);
    }
  }
  if (operands.empty()) return std::nullopt;
  std::optional<c10::ScalarType> dtype = eagerResultDtype(entry, node);
  if (!dtype) return std::nullopt;
  // The device of the operands; a 0-dim CPU tensor beside a tensor elsewhere does not
  // decide it (eager moves such scalars to the other tensors' device).
  c10::Device device = *operands[0]->device();
  for (const auto& t : operands) {
    if (*t->dim() > 0 && !t->device()->is_cpu()) device = *t->device();
  }
  if (shapeFromSelfOnly(node)) operands.resize(1);
  c10::VaryingShape<int64_t> sizes = broadcastSizes(operands);
  std::optional<bool> grad = false;
  for (const auto& t : operands) {
    if (!t->requiresGrad()) {
      grad = std::nullopt;
    } else if (*t->requiresGrad() && grad) {
      grad = true;
    }
  }
  return c10::TensorType::create(*dtype, device, sizes,
                                 c10::VaryingShape<int64_t>(*sizes.size()), grad);
}

void completeTypesInBlock(torch::jit::Block* block) {
  for (Node* node : block->nodes()) {
    for (torch::jit::Block* sub : node->blocks()) completeTypesInBlock(sub);
    if (node->outputs().size() != 1) continue;
    Value* out = node->output();
    auto type = tensorTypeOf(out);
    if (!type || hasDtypeDeviceRank(type)) continue;
    if (functionalEntryOf(node)) {
      if (auto self = tensorTypeOf(node->input(0)); hasDtypeDeviceRank(self)) out->setType(self);
      continue;
    }
    const ops::OpEntry* entry = ops::findOp(node);
    // A reduction's rank is not its operands' broadcast: it keeps what profiling missed.
    if (!entry || entry->reduces) continue;
    if (auto result = resultTypeOfTableOp(*entry, node)) out->setType(*result);
  }
}

}  // namespace

std::optional<c10::ScalarType> eagerResultDtype(const ops::OpEntry& entry, const Node* node) {
  std::optional<c10::Device> device = deviceOf(node);
  return codegen::tableResultDtype(entry, node,
                                   device ? device->type() : c10::DeviceType::CPU);
}

const ops::OpEntry* functionalEntryOf(const Node* node) {
  const c10::FunctionSchema* schema = node->maybeSchema();
  if (!schema || node->outputs().size() != 1 || schema->arguments().empty()) return nullptr;
  const std::string& name = schema->name();
  const c10::AliasInfo* self_alias = schema->arguments()[0].alias_info();
  if (name.size() < 2 || name.back() != '_' || !self_alias || !self_alias->isWrite()) {
    return nullptr;
  }
  return ops::findOpByName({name.substr(0, name.size() - 1), schema->overload_name()});
}

void completeTypesFromInputs(GraphPtr& graph) { completeTypesInBlock(graph->block()); }

}  // namespace fuser
