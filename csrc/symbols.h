// Node kinds the fuser adds to TorchScript graphs.
#pragma once

#include <ATen/core/interned_strings.h>

namespace fuser {

// A fused region: attribute `Subgraph`; inputs are tensors and non-constant scalars,
// outputs are tensors.
inline c10::Symbol fusionGroupSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::FusionGroup");
  return s;
}

// %ok = fuser::TypeGuard[types=[...], ints=[...]](tensors..., ints...): true when every
// tensor matches the dtype, device, rank and requires_grad its group's kernels were
// specialized on, and every int (a dtype the group reads as a constant) its value.
inline c10::Symbol typeGuardSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::TypeGuard");
  return s;
}

// fuser::philox_state(Device device, float p) -> (int seed, int offset): a Philox state
// drawn from torch's generator of `device` per call (runtime/philox_ops.cpp), for the
// random dropout of the group after it; raises as eager's dropout does for p outside
// [0, 1].
inline c10::Symbol philoxStateSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::philox_state");
  return s;
}

// fuser::philox_dropout(Tensor input, float p, int seed, int offset, bool
// scale_in_input_dtype) -> (Tensor, Tensor): native_dropout in training with the mask
// drawn from that state (ops/dropout.h).
inline c10::Symbol philoxDropoutSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::philox_dropout");
  return s;
}

// fuser::layer_norm_input_grad(Tensor grad_out, Tensor input, int[] normalized_shape,
// Tensor mean, Tensor rstd, Tensor? weight) -> Tensor: native_layer_norm_backward's
// input gradient alone (passes/layer_norm_backward.cpp), a row reduction groups fuse.
inline c10::Symbol layerNormInputGradSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::layer_norm_input_grad");
  return s;
}

inline c10::Symbol typeGuardIntsAttr() {
  static const c10::Symbol s = c10::Symbol::attr("ints");
  return s;
}

}  // namespace fuser
