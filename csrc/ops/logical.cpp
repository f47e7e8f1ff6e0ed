// Logical operators: any dtypes, each operand read as a truth value (nonzero, NaN
// included), result bool.
#include "ops/lowering_rules.h"

namespace fuser::ops {
namespace {

using c10::ScalarType;

template <IrOp Op>
Operand lowerLogical(IrBuilder& b, const Args& a) {
  ExprId r = b.binary(Op, b.cast(a[0].expr, ScalarType::Bool), b.cast(a[1].expr, ScalarType::Bool));
  return makeResult(r, ScalarType::Bool, {a[0], a[1]});
}

Operand lowerLogicalNot(IrBuilder& b, const Args& a) {
  return makeResult(b.unary(IrOp::LogicalNot, a[0].expr), ScalarType::Bool, {a[0]});
}

}  // namespace

static RegisterOps logicalRegistration({
    {"aten::logical_and(Tensor self, Tensor other) -> Tensor", lowerLogical<IrOp::LogicalAnd>},
    {"aten::logical_or(Tensor self, Tensor other) -> Tensor", lowerLogical<IrOp::LogicalOr>},
    {"aten::logical_xor(Tensor self, Tensor other) -> Tensor", lowerLogical<IrOp::LogicalXor>},
    {"aten::logical_not(Tensor self) -> Tensor", lowerLogicalNot},
});

}  // namespace fuser::ops
