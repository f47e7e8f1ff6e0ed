// Arithmetic: + - * / (alpha, rounding modes), negation, reciprocal, powers, the two
// remainders, lerp, addcmul and addcdiv, with eager's type promotion and dtype rules.
#include "ops/lowering_rules.h"

#include <limits>

namespace fuser::ops {
namespace {

using c10::ScalarType;

bool isIntegral(ScalarType t) { return c10::isIntegralType(t, /*includeBool=*/true); }

// Eager's alpha_check: alpha's kind must fit the result's.
void checkAlpha(const Operand& alpha, ScalarType t) {
  TORCH_CHECK(alpha.dtype != ScalarType::Bool || t == ScalarType::Bool,
              "Boolean alpha only supported for Boolean results.");
  TORCH_CHECK(c10::isFloatingType(t) || !c10::isFloatingType(alpha.dtype),
              "For integral input tensors, argument alpha must not be a floating point number.");
}

// alpha * x, with alpha in the computation type (eager reads it at opmath precision).
ExprId scaleBy(IrBuilder& b, const Operand& alpha, ExprId x, ScalarType t) {
  if (isConstant(alpha, 1)) return x;
  return b.binary(IrOp::Mul, castToOpmath(b, alpha, t), x);
}

// `first` op alpha * `second`: add and sub take (self, other), rsub (other, self).
Operand lowerScaledAddSub(IrBuilder& b, const Args& a, IrOp op, bool reversed) {
  const Operand& self = a[0];
  const Operand& other = a[1];
  const Operand& alpha = a[2];
  ScalarType t = resultType({self, other});
  checkAlpha(alpha, t);
  if (t == ScalarType::Bool) {
    TORCH_CHECK(op == IrOp::Add && !reversed,
                "Subtraction, the `-` operator, with a bool tensor is not supported.");
    // Bool addition saturates: self + alpha * other is true when either term is.
    ExprId scaled = castTo(b, other, t);
    if (!isConstant(alpha, 1)) {
      scaled = b.binary(IrOp::LogicalAnd, b.cast(alpha.expr, t), scaled);
    }
    return makeResult(b.binary(IrOp::LogicalOr, castTo(b, self, t), scaled), t, {self, other});
  }
  const Operand& first = reversed ? other : self;
  const Operand& second = reversed ? self : other;
  // Eager's CUDA kernels read a scalar operand and alpha at opmath precision, as mul
  // does; its CPU kernels round them to a 16-bit result type first (x - 0.1 in float16
  // differs in one value in six, a + 0.3 * b in most).
  const bool cuda = b.device() == c10::DeviceType::CUDA;
  auto operand = [&](const Operand& x) {
    // A 0-dim CUDA tensor is converted to the result type like any tensor.
    const bool scalar = cuda && x.category == Category::WrappedScalar;
    return scalar ? castToOpmath(b, x, t) : castTo(b, x, t);
  };
  ExprId scaled = operand(second);
  if (!isConstant(alpha, 1)) {  // alpha too: rounded to a 16-bit result type on the CPU
    scaled = b.binary(IrOp::Mul, cuda ? castToOpmath(b, alpha, t) : castTo(b, alpha, t), scaled);
  }
  ExprId r = b.binary(op, operand(first), scaled);
  return makeResult(r, t, {self, other});
}

Operand lowerAdd(IrBuilder& b, const Args& a) { return lowerScaledAddSub(b, a, IrOp::Add, false); }
Operand lowerSub(IrBuilder& b, const Args& a) { return lowerScaledAddSub(b, a, IrOp::Sub, false); }
Operand lowerRsub(IrBuilder& b, const Args& a) { return lowerScaledAddSub(b, a, IrOp::Sub, true); }

Operand lowerMul(IrBuilder& b, const Args& a) {
  ScalarType t = resultType({a[0], a[1]});
  IrOp op = t == ScalarType::Bool ? IrOp::LogicalAnd : IrOp::Mul;
  return makeResult(b.binary(op, castTo(b, a[0], t), castOther(b, a[1], t)), t, {a[0], a[1]});
}

Operand lowerTrueDiv(IrBuilder& b, const Args& a) {
  ScalarType t = toFloating(resultType({a[0], a[1]}));
  ExprId divisor = castOther(b, a[1], t);
  ExprId r;
  if (b.device() == c10::DeviceType::CUDA && a[1].category == Category::WrappedScalar) {
    // Eager's CUDA kernels multiply by a scalar divisor's reciprocal (taken at opmath
    // precision): x / 0.3 differs from x * (1 / 0.3) in one float16 value in seventy.
    const ExprId one = b.constant(1.0, b.typeOf(divisor));
    r = b.binary(IrOp::Mul, castTo(b, a[0], t), b.binary(IrOp::Div, one, divisor));
  } else {
    r = b.binary(IrOp::Div, castTo(b, a[0], t), divisor);
  }
  return makeResult(r, t, {a[0], a[1]});
}

// Integers: C division (trunc) or Python's // (floor); floats: trunc(a / b) or Python's //.
Operand lowerRoundingDiv(IrBuilder& b, const Args& a, bool floor) {
  ScalarType t = resultType({a[0], a[1]});
  TORCH_CHECK(t != ScalarType::Bool, "rounding division not implemented for 'Bool'");
  ExprId x = castTo(b, a[0], t);
  ExprId y = castOther(b, a[1], t);
  ExprId r;
  if (floor) {
    r = b.binary(IrOp::FloorDiv, x, y);
  } else if (isIntegral(t)) {
    r = b.binary(IrOp::Div, x, y);
  } else {
    r = b.unary(IrOp::Trunc, b.binary(IrOp::Div, x, y));
  }
  return makeResult(r, t, {a[0], a[1]});
}

Operand lowerFloorDivide(IrBuilder& b, const Args& a) { return lowerRoundingDiv(b, a, true); }

Operand lowerDivMode(IrBuilder& b, const Args& a) {
  std::string mode = constantString(a[2]);
  if (mode.empty()) return lowerTrueDiv(b, a);
  return lowerRoundingDiv(b, a, mode == "floor");
}

FusionDecision checkRoundingMode(const torch::jit::Node* node) {
  std::optional<c10::IValue> mode = constantInput(node, "rounding_mode");
  if (!mode) return FusionDecision::no("div: rounding_mode is not a constant");
  if (mode->isNone()) return FusionDecision::yes();
  const std::string& s = mode->toStringRef();
  if (s == "trunc" || s == "floor") return FusionDecision::yes();
  return FusionDecision::no("div: unknown rounding_mode '" + s + "'");  // eager raises
}

Operand lowerNeg(IrBuilder& b, const Args& a) {
  TORCH_CHECK(a[0].dtype != ScalarType::Bool,
              "Negation, the `-` operator, on a bool tensor is not supported.");
  return lowerUnaryKeepType(b, a, IrOp::Neg);
}

// x ** exponent with a scalar exponent. Eager computes the exponents below without pow,
// so do we (same rounding), and refuses negative integer powers of integers. Which
// shortcut it takes: sqrt, rsqrt and the reciprocal for the scalar exactly as given
// (0.5, -0.5, -1), the products for it as its kernel reads it, in the result's type for
// float16 and bfloat16 (bfloat16 x ** 2.001 is a square); pow itself takes the
// exponent so rounded too (float16 x ** 1.7 is x ** 1.7002, bfloat16's x ** 1.703125).
Operand lowerPowTensorScalar(IrBuilder& b, const Args& a) {
  const Operand& self = a[0];
  const Operand& exponent = a[1];
  ScalarType t = resultType({self, exponent});
  ExprId x = castTo(b, self, t);
  const std::optional<double> given = constantNumber(exponent);
  const std::optional<double> e = given ? std::optional(roundedTo(*given, t)) : std::nullopt;
  if (e && isIntegral(t)) {
    TORCH_CHECK(*e >= 0, "Integers to negative integer powers are not allowed.");
  }
  auto result = [&](ExprId r) { return makeResult(r, t, {self, exponent}); };
  // Eager rounds a 16-bit square to its type before the cube's second multiply or the
  // reciprocal of -2 (its CUDA kernels multiply in the 16-bit type, its CPU ones so for
  // bfloat16); the CPU float16 kernel keeps the square in float.
  auto square = [&] {
    const ExprId sq = b.binary(IrOp::Mul, x, x);
    const bool cuda = b.device() == c10::DeviceType::CUDA;
    if (t == ScalarType::BFloat16) return b.unary(IrOp::RoundToBFloat16, sq);
    return cuda && t == ScalarType::Half ? b.unary(IrOp::RoundToHalf, sq) : sq;
  };
  if (e && *e == 2) return result(b.binary(IrOp::Mul, x, x));
  if (e && *e == 3) return result(b.binary(IrOp::Mul, square(), x));
  // Its CPU float16 kernel takes pow for the square roots, whose zeros and -inf differ
  // from sqrt's: pow(-0, 0.5) is +0 (sqrt + 0 gives it) and pow(-inf, 0.5) is +inf.
  auto powRoot = [&] {
    const ScalarType f = b.typeOf(x);
    const ExprId root = b.binary(IrOp::Add, b.unary(IrOp::Sqrt, x), b.constant(0.0, f));
    const ExprId minus_inf = b.constant(-std::numeric_limits<double>::infinity(), f);
    const ExprId inf = b.constant(std::numeric_limits<double>::infinity(), f);
    return b.select(b.binary(IrOp::Eq, x, minus_inf), inf, root);
  };
  const bool root_by_pow = b.device() == c10::DeviceType::CPU && t == ScalarType::Half;
  if (given && c10::isFloatingType(t) && root_by_pow) {
    if (*given == 0.5) return result(powRoot());
    if (*given == -0.5) return result(b.unary(IrOp::Reciprocal, powRoot()));
  }
  if (given && c10::isFloatingType(t)) {
    if (*given == 0.5) return result(b.unary(IrOp::Sqrt, x));
    if (*given == -0.5) return result(b.unary(IrOp::Rsqrt, x));
    if (*given == -1) return result(b.unary(IrOp::Reciprocal, x));
  }
  if (e && c10::isFloatingType(t) && *e == -2) {
    return result(b.unary(IrOp::Reciprocal, square()));
  }
  ExprId power = b.binary(IrOp::Pow, x, castTo(b, exponent, t));
  // An exponent known only at run time: eager's roots as it chooses them, by the value
  // given (pow differs from sqrt at -0 and -inf). The products agree with pow but for
  // rounding, and the reciprocal with pow exactly.
  if (!given && c10::isFloatingType(t) && c10::isFloatingType(exponent.dtype) && !root_by_pow) {
    const ScalarType g = b.typeOf(exponent.expr);
    auto is = [&](double v) { return b.binary(IrOp::Eq, exponent.expr, b.constant(v, g)); };
    power = b.select(is(-0.5), b.unary(IrOp::Rsqrt, x), power);
    power = b.select(is(0.5), b.unary(IrOp::Sqrt, x), power);
  }
  return result(power);
}

// eager: square(x) = pow(x, 2), so a bool tensor squares to int64.
Operand lowerSquare(IrBuilder& b, const Args& a) {
  Operand two;
  two.expr = b.intConstant(2, ScalarType::Long);
  two.dtype = ScalarType::Long;
  two.constant = c10::IValue(int64_t{2});
  return lowerPowTensorScalar(b, {a[0], two});
}

// eager's lerp: the formula switches at |weight| = 0.5 for accuracy at both ends.
// self, end (and a tensor weight) share one floating dtype (eager checks it).
Operand lowerLerp(IrBuilder& b, const Args& a) {
  const Operand& self = a[0];
  const Operand& end = a[1];
  const Operand& weight = a[2];
  requireFloating(self, "lerp");
  ScalarType t = self.dtype;
  ExprId s = castTo(b, self, t);
  ExprId e = castTo(b, end, t);
  ExprId w = castToOpmath(b, weight, t);
  ExprId diff = b.binary(IrOp::Sub, e, s);
  auto nearSelf = [&] { return b.binary(IrOp::Add, s, b.binary(IrOp::Mul, w, diff)); };
  auto nearEnd = [&] {
    ExprId oneMinusW = b.binary(IrOp::Sub, literal(b, 1, t), w);
    return b.binary(IrOp::Sub, e, b.binary(IrOp::Mul, diff, oneMinusW));
  };
  ExprId r;
  if (std::optional<double> wc = constantNumber(weight)) {
    r = std::abs(*wc) < 0.5 ? nearSelf() : nearEnd();
  } else {
    ExprId small = b.binary(IrOp::Lt, b.unary(IrOp::Abs, w), literal(b, 0.5, t));
    r = b.select(small, nearSelf(), nearEnd());
  }
  return makeResult(r, t, {self, end, weight});
}

// self + value * t1 * t2 (addcmul) or self + value * t1 / t2 (addcdiv), in eager's order:
// (value * t1) op t2 on the CPU, value * (t1 op t2) on CUDA (a product can overflow in
// one order and not in the other).
Operand lowerAddcOp(IrBuilder& b, const Args& a, IrOp op) {
  const Operand& self = a[0];
  const Operand& t1 = a[1];
  const Operand& t2 = a[2];
  const Operand& value = a[3];
  ScalarType t = resultType({self, t1, t2});
  TORCH_CHECK(t != ScalarType::Bool, "addcmul/addcdiv not implemented for 'Bool'");
  const ExprId x1 = castTo(b, t1, t), x2 = castTo(b, t2, t);
  const ExprId term = b.device() == c10::DeviceType::CUDA
                          ? scaleBy(b, value, b.binary(op, x1, x2), t)
                          : b.binary(op, scaleBy(b, value, x1, t), x2);
  ExprId r = b.binary(IrOp::Add, castTo(b, self, t), term);
  return makeResult(r, t, {self, t1, t2});
}

Operand lowerAddcmul(IrBuilder& b, const Args& a) { return lowerAddcOp(b, a, IrOp::Mul); }

Operand lowerAddcdiv(IrBuilder& b, const Args& a) {
  TORCH_CHECK(!(isIntegral(a[1].dtype) && isIntegral(a[2].dtype)),
              "Integer division with addcdiv is no longer supported.");
  return lowerAddcOp(b, a, IrOp::Div);
}

}  // namespace

static RegisterOps arithmeticRegistration({
    {"aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", lowerAdd},
    {"aten::add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", lowerAdd},
    {"aten::sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", lowerSub},
    {"aten::sub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", lowerSub},
    {"aten::rsub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", lowerRsub},
    {"aten::rsub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", lowerRsub},
    {"aten::mul.Tensor(Tensor self, Tensor other) -> Tensor", lowerMul},
    {"aten::mul.Scalar(Tensor self, Scalar other) -> Tensor", lowerMul},
    {"aten::div.Tensor(Tensor self, Tensor other) -> Tensor", lowerTrueDiv},
    {"aten::div.Scalar(Tensor self, Scalar other) -> Tensor", lowerTrueDiv},
    {"aten::div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor",
     lowerDivMode, checkRoundingMode},
    {"aten::div.Scalar_mode(Tensor self, Scalar other, *, str? rounding_mode) -> Tensor",
     lowerDivMode, checkRoundingMode},
    {"aten::true_divide.Tensor(Tensor self, Tensor other) -> Tensor", lowerTrueDiv},
    {"aten::true_divide.Scalar(Tensor self, Scalar other) -> Tensor", lowerTrueDiv},
    {"aten::floor_divide(Tensor self, Tensor other) -> Tensor", lowerFloorDivide},
    {"aten::floor_divide.Scalar(Tensor self, Scalar other) -> Tensor", lowerFloorDivide},
    {"aten::neg(Tensor self) -> Tensor", lowerNeg},
    {"aten::reciprocal(Tensor self) -> Tensor", unaryToFloat<IrOp::Reciprocal>},
    {"aten::pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor", binaryPromoted<IrOp::Pow>},
    {"aten::pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor", lowerPowTensorScalar},
    {"aten::pow.Scalar(Scalar self, Tensor exponent) -> Tensor", binaryPromoted<IrOp::Pow>},
    {"aten::square(Tensor self) -> Tensor", lowerSquare},
    {"aten::fmod.Tensor(Tensor self, Tensor other) -> Tensor", binaryPromoted<IrOp::Fmod>},
    {"aten::fmod.Scalar(Tensor self, Scalar other) -> Tensor", binaryPromoted<IrOp::Fmod>},
    {"aten::remainder.Tensor(Tensor self, Tensor other) -> Tensor",
     binaryPromoted<IrOp::Remainder>},
    {"aten::remainder.Scalar(Tensor self, Scalar other) -> Tensor",
     binaryPromoted<IrOp::Remainder>},
    {"aten::remainder.Scalar_Tensor(Scalar self, Tensor other) -> Tensor",
     binaryPromoted<IrOp::Remainder>},
    {"aten::lerp.Scalar(Tensor self, Tensor end, Scalar weight) -> Tensor", lowerLerp},
    {"aten::lerp.Tensor(Tensor self, Tensor end, Tensor weight) -> Tensor", lowerLerp},
    {"aten::addcmul(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor",
     lowerAddcmul},
    {"aten::addcdiv(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor",
     lowerAddcdiv},
});

}  // namespace fuser::ops
