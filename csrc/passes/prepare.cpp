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
// - `x.to(x.device, dtype, ...)` is `x.to(dtype, ...)`: the Device value, which no
//   kernel can take as an argument, is gone.
#include <torch/csrc/jit/passes/tensorexpr_fuser.h>

#include "passes/inplace.h"
#include "passes/pipeline.h"
#include "passes/type_propagation.h"

namespace fuser {
namespace {

using torch::jit::Node;

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
  completeTypesFromInputs(graph);    // type_propagation.cpp: values profiling missed
  makeInPlaceOpsFunctional(graph);   // inplace.cpp
  dropOwnDeviceArguments(graph->block());
  completeTypesFromInputs(graph);    // and values the rewrites made
}

}  // namespace fuser
