// Lowering: a fusion group's subgraph, specialized on its inputs' dtypes and access
// patterns, becomes kernel IR with eager's dtype semantics.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <optional>
#include <vector>

#include "codegen/kernel_ir.h"
#include "ops/op_table.h"

namespace fuser::codegen {

// What the kernel knows about one subgraph input.
struct InputDesc {
  bool is_tensor = true;
  // Tensors
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  bool zero_dim = false;  // a 0-dim tensor (lower tier in type promotion)
  TensorInput access{};
  // Scalars
  ScalarArgKind scalar_kind = ScalarArgKind::Double;
};

// The descriptions of a kernel's inputs in order: per input whether it is a tensor
// (`is_tensor`), the scalars' kinds (`scalar_kinds`, indexed like it), and the tensors'
// dtypes, 0-dim flags and accesses, in tensor order.
std::vector<InputDesc> inputDescs(const std::vector<bool>& is_tensor,
                                  const std::vector<ScalarArgKind>& scalar_kinds,
                                  c10::ArrayRef<c10::ScalarType> dtypes,
                                  const std::vector<bool>& zero_dim,
                                  c10::ArrayRef<TensorInput> accesses);

// How a scalar of this JIT type reaches a kernel: float as double, bool, else int64.
ScalarArgKind scalarArgKindOf(const c10::TypePtr& type);

// A graph constant as an operand: numbers become IR constants; other constants
// (None, strings, lists) are passed to the op entry by value only.
ops::Operand constantOperand(IrBuilder& b, const torch::jit::Value* v);

// Emits the kernel for `subgraph`. Tensor inputs become kernel inputs in order,
// scalar inputs become scalar arguments in order; `device` is where the kernel runs;
// `one_pass_variance` sets Kernel::one_pass_variance (CUDA only).
// Throws c10::Error when a node cannot be lowered (the caller then runs the group
// without a kernel).
Kernel lowerSubgraph(const torch::jit::Graph& subgraph, const std::vector<InputDesc>& inputs,
                     int ndim, bool flat, c10::DeviceType device, bool one_pass_variance = false);

// The dtype the op-table entry of `node` gives its result for the profiled dtypes (and
// ranks) of its inputs, on `device`; nullopt when some input's type is incomplete or the
// entry raises for those dtypes. Where it differs from the profiled result, something
// outside the graph changed the op (the dispatcher's autocast runs some ops in float32):
// a kernel would not compute what the graph computed.
std::optional<c10::ScalarType> tableResultDtype(const torch::jit::Node* node,
                                                c10::DeviceType device);
// The same with the entry given (an in-place node's functional form); nullopt too when
// the entry's check refuses the node.
std::optional<c10::ScalarType> tableResultDtype(const ops::OpEntry& entry,
                                                const torch::jit::Node* node,
                                                c10::DeviceType device);

}  // namespace fuser::codegen
