// Eager PyTorch's type promotion, for the lowering: which dtype an op's result has
// and which type its operands are computed in.
#pragma once

#include <vector>

#include "ops/op_table.h"

namespace fuser::ops {

// torch.result_type over the numeric operands (tensors of rank > 0 first, then 0-dim
// tensors, then wrapped Python scalars, as c10 does). Non-number operands are skipped.
c10::ScalarType resultType(const std::vector<Operand>& operands);

// Integral and bool become the default floating dtype (float32), as eager's
// "int-to-float" ops (true division, sqrt, exp, ...) do.
c10::ScalarType toFloating(c10::ScalarType t);

// The category of a result computed from `operands`: a tensor of rank > 0 if any
// operand is one, else a 0-dim tensor.
Category resultCategory(const std::vector<Operand>& operands);

// `x` converted to `dtype` and held in its computation type, as eager's common-dtype cast:
// a value converted to float16/bfloat16 is rounded to that precision first (so
// `half_tensor < 0.1` compares with half(0.1), like eager).
codegen::ExprId castTo(codegen::IrBuilder& b, const Operand& x, c10::ScalarType dtype);

// A scalar `v` as eager's kernels of `dtype` read it: through float and then the 16-bit
// type for float16 and bfloat16, unchanged otherwise.
double roundedTo(double v, c10::ScalarType dtype);

// `x` in the computation type of `dtype` without that rounding: eager's multiplication
// and division kernels read a scalar `other` of a half-precision op at float precision.
codegen::ExprId castToOpmath(codegen::IrBuilder& b, const Operand& x, c10::ScalarType dtype);

// float16 or bfloat16.
bool isReducedFloat(c10::ScalarType t);

// A result operand: `expr` holding a value of eager dtype `dtype`.
Operand makeResult(codegen::ExprId expr, c10::ScalarType dtype, const std::vector<Operand>& from);

}  // namespace fuser::ops
