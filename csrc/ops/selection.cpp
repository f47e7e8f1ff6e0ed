// Elementwise selection: where and masked_fill. where promotes its two branches (scalar
// branches count as wrapped scalars: `where(c, 1.0, 0)` is float32); masked_fill keeps
// self's dtype and casts the fill value to it.
#include "ops/lowering_rules.h"

namespace fuser::ops {
namespace {

using c10::ScalarType;

// Eager accepts a uint8 condition (deprecated) and reads it as nonzero.
ExprId condition(IrBuilder& b, const Operand& cond) { return b.cast(cond.expr, ScalarType::Bool); }

Operand lowerWhere(IrBuilder& b, const Args& a) {
  const Operand& cond = a[0];
  ScalarType t = resultType({a[1], a[2]});
  ExprId r = b.select(condition(b, cond), castTo(b, a[1], t), castTo(b, a[2], t));
  return makeResult(r, t, {cond, a[1], a[2]});
}

Operand lowerMaskedFill(IrBuilder& b, const Args& a) {
  const Operand& self = a[0];
  const Operand& mask = a[1];
  const Operand& value = a[2];
  TORCH_CHECK(mask.dtype == ScalarType::Bool,
              "masked_fill_ only supports boolean masks, but got mask with dtype ", mask.dtype);
  TORCH_CHECK(value.category != Category::DimTensor,
              "masked_fill_ only supports a 0-dimensional value tensor");
  ScalarType t = self.dtype;
  ExprId r = b.select(mask.expr, castTo(b, value, t), self.expr);
  return makeResult(r, t, {self, mask});
}

}  // namespace

static RegisterOps selectionRegistration({
    {"aten::where.self(Tensor condition, Tensor self, Tensor other) -> Tensor", lowerWhere},
    {"aten::where.ScalarOther(Tensor condition, Tensor self, Scalar other) -> Tensor", lowerWhere},
    {"aten::where.ScalarSelf(Tensor condition, Scalar self, Tensor other) -> Tensor", lowerWhere},
    {"aten::where.Scalar(Tensor condition, Scalar self, Scalar other) -> Tensor", lowerWhere},
    {"aten::masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor", lowerMaskedFill},
    {"aten::masked_fill.Tensor(Tensor self, Tensor mask, Tensor value) -> Tensor", lowerMaskedFill},
    // The in-place masked_fill_ made functional: the same values, laid out like self.
    {"fuser::masked_fill_like_self.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor",
     lowerMaskedFill},
    {"fuser::masked_fill_like_self.Tensor(Tensor self, Tensor mask, Tensor value) -> Tensor",
     lowerMaskedFill},
});

}  // namespace fuser::ops
