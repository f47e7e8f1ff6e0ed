// Building blocks shared by the ops/*.cpp entries: reading an entry's arguments, the
// checks that refuse arguments the kernel cannot take (non-constant modes, devices),
// and the common lowering shapes (elementwise unary and binary ops under eager's type
// promotion). An entry's lower() throws c10::Error where eager would raise for the
// dtypes it is given; the runtime then runs the group's fallback, which raises too.
#pragma once

#include <ATen/core/ivalue.h>

#include <optional>
#include <vector>

#include "ops/op_table.h"
#include "ops/type_promotion.h"

namespace fuser::ops {

using codegen::ExprId;
using codegen::IrBuilder;
using codegen::IrOp;
using Args = std::vector<Operand>;

// ---- Arguments as the lowering gives them (op_table.h: Operand) -------------------

// An optional argument given as None.
bool isNone(const Operand& o);
// The value of a constant number argument (int, float or bool), if it is one.
std::optional<double> constantNumber(const Operand& o);
bool isConstant(const Operand& o, double value);
// A constant string argument ("" if None).
std::string constantString(const Operand& o);
// A literal `value` held in the computation type of `dtype`.
ExprId literal(IrBuilder& b, double value, c10::ScalarType dtype);
// `other` of a multiplication or division converted to `dtype`: eager reads a Python
// scalar `other` of a half-precision op at float precision (castToOpmath), and a 0-dim
// tensor too on the CPU; its CUDA kernels convert a 0-dim CUDA tensor to the 16-bit
// result type like any tensor (castTo), as they do in add and sub.
ExprId castOther(IrBuilder& b, const Operand& other, c10::ScalarType dtype);

// Throws as eager does when `x` is not a floating tensor (gelu, elu, ... on integers).
void requireFloating(const Operand& x, const char* op);
// Throws as eager does for a bool tensor (relu, neg, abs, ...).
void requireNotBool(const Operand& x, const char* op);

// ---- Checks on the graph node ------------------------------------------------------

// The named input's value if it is a graph constant.
std::optional<c10::IValue> constantInput(const torch::jit::Node* node, const char* name);
// The named input is a graph constant.
FusionDecision requireConstant(const torch::jit::Node* node, const char* name);
// The named optional input is a constant (None or not) or of a non-optional type, so
// the lowering knows whether it is present.
FusionDecision requireKnownPresence(const torch::jit::Node* node, const char* name);
// A complete profiled type whose strides are the row-major ones of its sizes.
bool isProfiledRowMajor(const c10::TensorType& type);

// ---- Common lowering shapes --------------------------------------------------------

Operand lowerUnaryKeepType(IrBuilder& b, const Args& a, IrOp op);  // abs, neg, ...
Operand lowerUnaryToFloat(IrBuilder& b, const Args& a, IrOp op);   // sqrt, exp, ...
// args[0] op args[1], both cast to the promoted type; the result has that type.
Operand lowerBinaryPromoted(IrBuilder& b, const Args& a, IrOp op);
// As above, integral promoted types computed in float32 (atan2).
Operand lowerBinaryToFloat(IrBuilder& b, const Args& a, IrOp op);
// Compared in the promoted type; the result is bool.
Operand lowerComparison(IrBuilder& b, const Args& a, IrOp op);

template <IrOp Op>
Operand unaryKeepType(IrBuilder& b, const Args& a) {
  return lowerUnaryKeepType(b, a, Op);
}
template <IrOp Op>
Operand unaryToFloat(IrBuilder& b, const Args& a) {
  return lowerUnaryToFloat(b, a, Op);
}
template <IrOp Op>
Operand binaryPromoted(IrBuilder& b, const Args& a) {
  return lowerBinaryPromoted(b, a, Op);
}
template <IrOp Op>
Operand binaryToFloat(IrBuilder& b, const Args& a) {
  return lowerBinaryToFloat(b, a, Op);
}
template <IrOp Op>
Operand comparison(IrBuilder& b, const Args& a) {
  return lowerComparison(b, a, Op);
}

}  // namespace fuser::ops
