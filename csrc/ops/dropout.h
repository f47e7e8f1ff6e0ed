// Dropout, as graphs hold it: aten::dropout(x, p, train) in no-grad graphs, and in
// training graphs autodiff's native_dropout(x, p, train), which returns the output and
// the mask that native_dropout_backward(grad, mask, scale) multiplies the gradient by.
//
// `train` False (eval mode) is a copy of x and a mask of ones (passes/dropout.cpp
// reads the copy as x itself where nothing writes either). `train` True draws a
// random mask: passes/dropout.cpp turns such a node inside a group into
// fuser::philox_dropout, which reads a Philox state (codegen/philox.h) that a
// fuser::philox_state node draws from torch's generator per call; its kernels and its
// interpreter implementation (runtime/philox_ops.cpp) give the same mask. A `train` that
// is a module's self.training is made a constant by passes/dropout.cpp (a branch per
// value) or, beside batch_norm's `training`, pinned False by the guard.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <cstddef>

namespace fuser::ops {

// The `train` argument of native_dropout and aten::dropout.
inline constexpr size_t kDropoutTrain = 2;

// native_dropout or aten::dropout (the ops whose `train` is kDropoutTrain).
bool isDropout(const torch::jit::Node* node);
bool isNativeDropout(const torch::jit::Node* node);

// A dropout whose `train` is the constant True (or None, native_dropout's default).
bool isRandomDropout(const torch::jit::Node* node);

}  // namespace fuser::ops
