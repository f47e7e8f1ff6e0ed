// Dropout as TorchScript's autodiff writes it in training graphs: native_dropout(x, p,
// train) returns the output and the mask that native_dropout_backward(grad, mask, scale)
// multiplies the gradient by. Fused so far: native_dropout with `train` False (a module
// in eval mode: its `self.training` is pinned to False by the guard, as batch_norm's),
// which is a copy of x and a mask of ones, and native_dropout_backward with a bool mask
// (grad * mask * scale, exact in any dtype since the mask is 0 or 1). Random masks (train
// True) stay with ATen.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <cstddef>

namespace fuser::ops {

// native_dropout's `train` argument.
inline constexpr size_t kNativeDropoutTrain = 2;

bool isNativeDropout(const torch::jit::Node* node);

}  // namespace fuser::ops
