// Random dropout while PyTorch's stream is being captured into a CUDA graph. The
// generator's seed and offset cannot be read then (ATen refuses: a replay must draw a
// fresh mask, which only ATen's graph-safe random state gives), so fuser::philox_state
// answers an offset that says so, and the groups that read it run interpreted, where
// fuser::philox_dropout draws the mask with ATen's native_dropout: eager's own captured
// dropout, a fresh mask per replay.
#pragma once

#include <ATen/core/stack.h>
#include <torch/csrc/jit/ir/ir.h>

#include <cstdint>
#include <vector>

namespace fuser::runtime {

// The offset fuser::philox_state gives while the stream is captured (real offsets are
// never negative).
constexpr int64_t kMaskDrawnByAten = -1;

// The inputs of a group's subgraph read as a fuser::philox_dropout's offset.
std::vector<size_t> philoxOffsetInputs(const torch::jit::Graph& subgraph);

// Whether any of those inputs, among the last `num_inputs` values of the stack, says
// that ATen draws the masks of this call.
bool masksDrawnByAten(const torch::jit::Stack& stack, size_t num_inputs,
                      const std::vector<size_t>& offset_inputs);

}  // namespace fuser::runtime
