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

inline c10::Symbol typeGuardIntsAttr() {
  static const c10::Symbol s = c10::Symbol::attr("ints");
  return s;
}

}  // namespace fuser
