// "May this node join a fusion group?" and "may this producer join this consumer's
// group?", each answered with a FusionDecision that says why not. Whether the producer
// can be moved next to its consumer without breaking aliasing is decided by
// partition.cpp, which owns the AliasDb; everything else is decided here.
#pragma once

#include <c10/core/Device.h>
#include <torch/csrc/jit/ir/ir.h>

#include <optional>

#include "fusion_decision.h"

namespace fuser {

// Yes when `value` is a tensor whose type is complete (dtype, device, rank), with a
// dtype kernels handle, on a device config() allows.
FusionDecision checkTensorValue(const torch::jit::Value* value);

// The value's tensor type where profiling (or propagation) made it complete (dtype,
// device, sizes, strides), else null: what the rewrites that decide from types alone read.
c10::TensorTypePtr completeTensorType(const torch::jit::Value* value);

// The same for a CUDA value that records no gradient, else null: what the rewrites that
// make ATen's hidden copies explicit read (matmul_operands.cpp, reshape_copies.cpp).
c10::TensorTypePtr completeCudaTypeWithoutGrad(const torch::jit::Value* value);

// Yes for a fusion group, and for an operator of the table (ops::checkOpSupported) whose
// tensor operands all pass checkTensorValue and live on one device, whose other
// non-constant inputs are int, float or bool, and whose outputs are all tensors.
FusionDecision checkFusible(const torch::jit::Node* node);

// The device of the node's tensor operands (its first tensor input, else output).
std::optional<c10::Device> deviceOf(const torch::jit::Node* node);

// Non-constant inputs plus outputs of `node` as a group of its own.
size_t countArgs(const torch::jit::Node* node);

// Yes when `args` inputs + outputs fit in config().arg_limit.
FusionDecision checkArgLimit(size_t args);

// Inputs plus outputs of the group that `producer` joining `consumer` would give:
// non-constant inputs of both, less the producer outputs the consumer reads; the
// consumer's outputs plus the producer outputs still read by other nodes.
size_t countMergedArgs(const torch::jit::Node* consumer, const torch::jit::Node* producer);

// Yes when a CUDA kernel reading every input of the merged group and writing one output
// fits in CUDA's parameter space (param_space.h); groups with more outputs than fit are
// split later, by outputs. Always yes off CUDA.
FusionDecision checkParamSpace(const torch::jit::Node* consumer,
                               const torch::jit::Node* producer);

// Yes when the producer's results that other nodes read too (and so would become group
// outputs) have the profiled shape of the consumer group's outputs: one kernel writes
// every output of a group over one iteration space. Unknown shapes are let through;
// the runtime then checks each call (fusion_executor.h).
FusionDecision checkOutputShapes(const torch::jit::Node* consumer,
                                 const torch::jit::Node* producer);

// Groups that reduce (ops/reductions.h) run as row kernels: nullopt when neither side
// holds a reduction; otherwise yes when every reduction of the merged group spans the
// same trailing dims, it holds nothing but reductions and table ops, no reduction that
// drops its dims feeds another op of the group, every reduction reads the same profiled
// shape, and each output has that shape or the reduced one (unknown shapes are let
// through: the runtime checks every call). Beside a reduction over the trailing dims,
// sums over exactly the leading dims (ops::isColumnSumBeside) may join on the devices
// columnSumsJoinOn allows, where their results feed nothing in the group.
std::optional<FusionDecision> checkRowGroup(const torch::jit::Node* consumer,
                                            const torch::jit::Node* producer);

// Whether `node` is a reduction of the table, or a group holding one.
bool reduces(const torch::jit::Node* node);

// Whether leading-dims sums join row groups on `device` (config.h: column_sums).
bool columnSumsJoinOn(const std::optional<c10::Device>& device);

// Whether `node` is an aten::batch_norm of the table, or a group holding one.
bool holdsBatchNorm(const torch::jit::Node* node);

// Whether `user` must read its input number `input` from outside its group: the input
// and per-channel operands of batch_norm (ops/batch_norm.h), which the kernel reads as
// group inputs, so that the runtime can check their sizes against each other, and
// group_norm's weight and bias (read per channel by the row executor).
bool readsFromOutsideItsGroup(const torch::jit::Node* user, size_t input);

// Whether some fusible node reads `value` as an operand its group may compute (not one it
// must read from outside, readsFromOutsideItsGroup): the rewrites that make `value` an
// add (epilogues.cpp, adds_past_views.cpp) do so only where that group would take it.
bool readByFusibleNode(const torch::jit::Value* value);

// Whether `node` is aten::view or aten::reshape: the same elements in other sizes.
bool isView(const torch::jit::Node* node);

// Whether `node` is permute(x, [0, 2, 3, 1]): NCHW's channels moved last, as ConvNeXt
// does before each LayerNorm over them.
bool permutesToRows(const torch::jit::Node* node);

// Yes unless `producer` computes an operand that some node of `consumer` must read
// from outside its group (readsFromOutsideItsGroup).
FusionDecision checkOperandsFromOutside(const torch::jit::Node* consumer,
                                        const torch::jit::Node* producer);

// Yes when both are fusible, in one block, on one device, the merged group's outputs
// keep one shape (or, for a group that reduces, pass checkRowGroup), no operand that
// must come from outside the group is computed in it, its inputs fit CUDA's parameter space, and the group stays within
// config().arg_limit. Alias safety is not
// checked here.
FusionDecision canFuse(const torch::jit::Node* consumer, const torch::jit::Node* producer);

}  // namespace fuser
