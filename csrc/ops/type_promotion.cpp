// Eager's result-type rules, mirrored from the behaviour of torch.result_type: three
// tiers (tensors of rank > 0, 0-dim tensors, wrapped scalars); a lower tier only
// matters when its category (bool < integral < floating) is higher.
#include "ops/type_promotion.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

namespace fuser::ops {
namespace {

using c10::ScalarType;

int categoryRank(ScalarType t) {
  if (t == ScalarType::Bool) return 0;
  if (c10::isIntegralType(t, /*includeBool=*/false)) return 1;
  return 2;  // floating (complex is refused before lowering)
}

ScalarType promote(ScalarType a, ScalarType b) {
  if (a == ScalarType::Undefined) return b;
  if (b == ScalarType::Undefined) return a;
  return c10::promoteTypes(a, b);
}

// The dtype a higher tier takes after seeing a lower tier's dtype.
ScalarType combine(ScalarType higher, ScalarType lower) {
  if (higher == ScalarType::Undefined) return lower;
  if (lower == ScalarType::Undefined) return higher;
  if (categoryRank(lower) > categoryRank(higher)) return promote(higher, lower);
  return higher;
}

// Every value of `from` is exactly a value of `to` (so no rounding is needed).
bool representableIn(ScalarType from, ScalarType to) {
  return from == to || from == ScalarType::Bool || from == ScalarType::Byte ||
         from == ScalarType::Char;
}

}  // namespace

bool isReducedFloat(ScalarType t) { return t == ScalarType::Half || t == ScalarType::BFloat16; }

c10::ScalarType resultType(const std::vector<Operand>& operands) {
  ScalarType dim = ScalarType::Undefined, zero = ScalarType::Undefined,
             wrapped = ScalarType::Undefined;
  for (const Operand& o : operands) {
    if (o.expr < 0) continue;
    switch (o.category) {
      case Category::DimTensor:
        dim = promote(dim, o.dtype);
        break;
      case Category::ZeroDimTensor:
        zero = promote(zero, o.dtype);
        break;
      case Category::WrappedScalar: {
        // Python floats count as the default dtype, ints as int64, bools as bool.
        ScalarType t = c10::isFloatingType(o.dtype) ? ScalarType::Float : o.dtype;
        wrapped = promote(wrapped, t);
        break;
      }
    }
  }
  return combine(dim, combine(zero, wrapped));
}

c10::ScalarType toFloating(c10::ScalarType t) {
  return c10::isFloatingType(t) ? t : ScalarType::Float;
}

Category resultCategory(const std::vector<Operand>& operands) {
  bool any_zero = false;
  for (const Operand& o : operands) {
    if (o.category == Category::DimTensor) return Category::DimTensor;
    any_zero |= o.category == Category::ZeroDimTensor;
  }
  return any_zero ? Category::ZeroDimTensor : Category::WrappedScalar;
}

double roundedTo(double v, c10::ScalarType dtype) {
  if (!isReducedFloat(dtype)) return v;
  const auto f = static_cast<float>(v);
  return dtype == ScalarType::Half ? static_cast<float>(c10::Half(f))
                                   : static_cast<float>(c10::BFloat16(f));
}

codegen::ExprId castTo(codegen::IrBuilder& b, const Operand& x, c10::ScalarType dtype) {
  if (!isReducedFloat(dtype) || representableIn(x.dtype, dtype)) {
    return b.cast(x.expr, codegen::computeType(dtype));
  }
  // Eager casts a scalar or 0-dim operand to the half type before computing; a constant
  // is rounded here, anything else in the kernel (double -> float -> half, as c10 does).
  if (x.constant && (x.constant->isDouble() || x.constant->isInt() || x.constant->isBool())) {
    return b.constant(roundedTo(x.constant->toScalar().toDouble(), dtype), ScalarType::Float);
  }
  codegen::ExprId f = b.cast(x.expr, ScalarType::Float);
  return b.unary(
      dtype == ScalarType::Half ? codegen::IrOp::RoundToHalf : codegen::IrOp::RoundToBFloat16, f);
}

codegen::ExprId castToOpmath(codegen::IrBuilder& b, const Operand& x, c10::ScalarType dtype) {
  return b.cast(x.expr, codegen::computeType(dtype));
}

Operand makeResult(codegen::ExprId expr, c10::ScalarType dtype, const std::vector<Operand>& from) {
  Operand r;
  r.expr = expr;
  r.dtype = dtype;
  r.category = resultCategory(from);
  if (r.category == Category::WrappedScalar) r.category = Category::ZeroDimTensor;
  return r;
}

}  // namespace fuser::ops
