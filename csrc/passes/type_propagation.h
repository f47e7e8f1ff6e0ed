// Types for values profiling did not see: results of table ops (and of in-place
// variants of them) get dtype, device and rank from their operands by eager's rules.
#pragma once

#include <c10/core/ScalarType.h>
#include <torch/csrc/jit/ir/ir.h>

#include <optional>

#include "ops/op_table.h"
#include "passes/pipeline.h"

namespace fuser {

// Gives results without a profiled dtype, device or rank the types their profiled
// operands imply (see the .cpp's header for what holds afterwards).
void completeTypesFromInputs(GraphPtr& graph);

// The dtype eager gives the result of `entry`'s operator applied to `node`'s operands
// (the table's own promotion rules), or nullopt when an operand's dtype is unknown or
// the entry refuses the node.
std::optional<c10::ScalarType> eagerResultDtype(const ops::OpEntry& entry,
                                                const torch::jit::Node* node);

// The table entry of an in-place node's functional form (`aten::add_.Tensor` ->
// `aten::add.Tensor`), or null when the node is not in-place or that form is not fusible.
const ops::OpEntry* functionalEntryOf(const torch::jit::Node* node);

}  // namespace fuser
