// Elementwise math functions: roots, exponentials, logarithms, trigonometry, error
// functions, rounding and sign. Transcendental functions of integer or bool tensors
// give float32 (eager's int-to-float rule); rounding functions leave integers as they are.
#include <cmath>
#include <limits>

#include "ops/lowering_rules.h"

namespace fuser::ops {
namespace {

using c10::ScalarType;

bool isIntegralOrBool(ScalarType t) { return c10::isIntegralType(t, /*includeBool=*/true); }

// Eager's abs of a bool tensor raises on CPU and is the identity on CUDA; the group would
// be specialized per device after the guard, so bool input is left to eager instead.
FusionDecision checkAbs(const torch::jit::Node* node) {
  auto self = node->input(0)->type()->cast<c10::TensorType>();
  if (self && self->scalarType() == ScalarType::Bool) {
    return FusionDecision::no("aten::abs of a bool tensor: eager's result depends on the device");
  }
  return FusionDecision::yes();
}

Operand lowerAbs(IrBuilder& b, const Args& a) {
  requireNotBool(a[0], "abs");
  if (a[0].dtype == ScalarType::Byte) return makeResult(a[0].expr, a[0].dtype, {a[0]});
  return lowerUnaryKeepType(b, a, IrOp::Abs);
}

// floor, ceil, round, trunc: identities on integers (eager copies them; bool raises).
template <IrOp Op>
Operand lowerRounding(IrBuilder& b, const Args& a) {
  requireNotBool(a[0], codegen::irOpName(Op));
  if (isIntegralOrBool(a[0].dtype)) return makeResult(a[0].expr, a[0].dtype, {a[0]});
  return lowerUnaryKeepType(b, a, Op);
}

// eager: round(x * 10^d) / 10^d, or round(x / 10^-d) * 10^-d for negative d.
Operand lowerRoundDecimals(IrBuilder& b, const Args& a) {
  requireFloating(a[0], "round");
  ScalarType t = a[0].dtype;
  int64_t decimals = a[1].constant->toInt();
  ExprId scale = literal(b, std::pow(10.0, static_cast<double>(std::abs(decimals))), t);
  IrOp in = decimals >= 0 ? IrOp::Mul : IrOp::Div;
  IrOp out = decimals >= 0 ? IrOp::Div : IrOp::Mul;
  ExprId r = b.binary(out, b.unary(IrOp::Round, b.binary(in, a[0].expr, scale)), scale);
  return makeResult(r, t, {a[0]});
}

FusionDecision checkDecimals(const torch::jit::Node* node) {
  return requireConstant(node, "decimals");
}

// x - trunc(x), as eager.
Operand lowerFrac(IrBuilder& b, const Args& a) {
  requireFloating(a[0], "frac");
  ExprId x = a[0].expr;
  return makeResult(b.binary(IrOp::Sub, x, b.unary(IrOp::Trunc, x)), a[0].dtype, {a[0]});
}

Operand lowerSign(IrBuilder& b, const Args& a) {
  if (a[0].dtype == ScalarType::Bool) return makeResult(a[0].expr, a[0].dtype, {a[0]});
  return lowerUnaryKeepType(b, a, IrOp::Sign);
}

// 2 ** x (no exp2 primitive; pow of an exact power of two is as accurate).
Operand lowerExp2(IrBuilder& b, const Args& a) {
  ScalarType t = toFloating(a[0].dtype);
  ExprId r = b.binary(IrOp::Pow, literal(b, 2, t), castTo(b, a[0], t));
  return makeResult(r, t, {a[0]});
}

Operand lowerIsNan(IrBuilder& b, const Args& a) {
  ExprId r = c10::isFloatingType(a[0].dtype) ? b.unary(IrOp::IsNan, a[0].expr)
                                             : b.intConstant(0, ScalarType::Bool);
  return makeResult(r, ScalarType::Bool, {a[0]});
}

// |x| == inf on floating inputs (NaN is not infinite); false on integers, as eager's.
Operand lowerIsInf(IrBuilder& b, const Args& a) {
  if (!c10::isFloatingType(a[0].dtype)) {
    return makeResult(b.intConstant(0, ScalarType::Bool), ScalarType::Bool, {a[0]});
  }
  const ExprId x = a[0].expr;
  const ExprId inf = b.constant(std::numeric_limits<double>::infinity(), b.typeOf(x));
  return makeResult(b.binary(IrOp::Eq, b.unary(IrOp::Abs, x), inf), ScalarType::Bool, {a[0]});
}

}  // namespace

static RegisterOps mathFunctionsRegistration({
    {"aten::abs(Tensor self) -> Tensor", lowerAbs, checkAbs},
    {"aten::sqrt(Tensor self) -> Tensor", unaryToFloat<IrOp::Sqrt>},
    {"aten::rsqrt(Tensor self) -> Tensor", unaryToFloat<IrOp::Rsqrt>},
    {"aten::exp(Tensor self) -> Tensor", unaryToFloat<IrOp::Exp>},
    {"aten::exp2(Tensor self) -> Tensor", lowerExp2},
    {"aten::expm1(Tensor self) -> Tensor", unaryToFloat<IrOp::Expm1>},
    {"aten::log(Tensor self) -> Tensor", unaryToFloat<IrOp::Log>},
    {"aten::log1p(Tensor self) -> Tensor", unaryToFloat<IrOp::Log1p>},
    {"aten::log2(Tensor self) -> Tensor", unaryToFloat<IrOp::Log2>},
    {"aten::log10(Tensor self) -> Tensor", unaryToFloat<IrOp::Log10>},
    {"aten::sin(Tensor self) -> Tensor", unaryToFloat<IrOp::Sin>},
    {"aten::cos(Tensor self) -> Tensor", unaryToFloat<IrOp::Cos>},
    {"aten::tan(Tensor self) -> Tensor", unaryToFloat<IrOp::Tan>},
    {"aten::asin(Tensor self) -> Tensor", unaryToFloat<IrOp::Asin>},
    {"aten::acos(Tensor self) -> Tensor", unaryToFloat<IrOp::Acos>},
    {"aten::atan(Tensor self) -> Tensor", unaryToFloat<IrOp::Atan>},
    {"aten::atan2(Tensor self, Tensor other) -> Tensor", binaryToFloat<IrOp::Atan2>},
    {"aten::sinh(Tensor self) -> Tensor", unaryToFloat<IrOp::Sinh>},
    {"aten::cosh(Tensor self) -> Tensor", unaryToFloat<IrOp::Cosh>},
    {"aten::tanh(Tensor self) -> Tensor", unaryToFloat<IrOp::Tanh>},
    {"aten::erf(Tensor self) -> Tensor", unaryToFloat<IrOp::Erf>},
    {"aten::erfc(Tensor self) -> Tensor", unaryToFloat<IrOp::Erfc>},
    {"aten::floor(Tensor self) -> Tensor", lowerRounding<IrOp::Floor>},
    {"aten::ceil(Tensor self) -> Tensor", lowerRounding<IrOp::Ceil>},
    {"aten::round(Tensor self) -> Tensor", lowerRounding<IrOp::Round>},
    {"aten::round.decimals(Tensor self, *, int decimals) -> Tensor", lowerRoundDecimals,
     checkDecimals},
    {"aten::trunc(Tensor self) -> Tensor", lowerRounding<IrOp::Trunc>},
    {"aten::frac(Tensor self) -> Tensor", lowerFrac},
    {"aten::sign(Tensor self) -> Tensor", lowerSign},
    {"aten::sgn(Tensor self) -> Tensor", lowerSign},
    {"aten::isnan(Tensor self) -> Tensor", lowerIsNan},
    {"aten::isinf(Tensor self) -> Tensor", lowerIsInf},
});

}  // namespace fuser::ops
