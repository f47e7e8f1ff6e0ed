// Activation functions, composed from IR primitives with eager's formulas (the same
// branch conditions, so NaN and the thresholds behave alike). Most are float-only in
// eager; relu, relu6 and hardtanh also take integers (they are clamps).
#include "ops/lowering_rules.h"

#include <cmath>

namespace fuser::ops {
namespace {

using c10::ScalarType;

// An activation of a floating tensor x: `formula(x)` in x's computation type.
template <typename Formula>
Operand floatActivation(IrBuilder& b, const Args& a, const char* name, Formula formula) {
  requireFloating(a[0], name);
  ScalarType t = a[0].dtype;
  return makeResult(formula(a[0].expr, t), t, {a[0]});
}

// max(x, lo), NaN-propagating. Eager's CUDA clamps take fmaxf, whose max of -0 and +0
// is +0 (relu(-0) is +0 there, -0 on the CPU): x <= lo ? lo : x gives the same when lo
// is a number (`lo_is_number`; a NaN bound must still give NaN).
ExprId clampBelow(IrBuilder& b, ExprId x, ExprId lo, bool lo_is_number = true) {
  if (lo_is_number && b.device() == c10::DeviceType::CUDA && c10::isFloatingType(b.typeOf(x))) {
    return b.select(b.binary(IrOp::Le, x, lo), lo, x);
  }
  return b.binary(IrOp::Max, x, lo);
}

// min(max(x, lo), hi) in x's dtype, NaN-propagating (eager's hardtanh casts the bounds).
ExprId clampTo(IrBuilder& b, ExprId x, ExprId lo, ExprId hi, bool lo_is_number = true) {
  return b.binary(IrOp::Min, clampBelow(b, x, lo, lo_is_number), hi);
}

// A float16 result is seen only rounded (the next op rounds it, a store converts it),
// which lets CUDA compute it without IEEE division's branch (cuda_prelude.h).
Operand lowerSigmoid(IrBuilder& b, const Args& a) {
  const bool half = toFloating(a[0].dtype) == ScalarType::Half;
  return lowerUnaryToFloat(b, a, half ? IrOp::SigmoidHalf : IrOp::Sigmoid);
}

Operand lowerRelu(IrBuilder& b, const Args& a) {
  TORCH_CHECK(a[0].dtype != ScalarType::Bool, "Boolean inputs not supported for relu");
  ScalarType t = a[0].dtype;
  return makeResult(clampBelow(b, a[0].expr, literal(b, 0, t)), t, {a[0]});
}

Operand lowerHardtanh(IrBuilder& b, const Args& a) {
  TORCH_CHECK(a[0].dtype != ScalarType::Bool, "Bool inputs not supported for hardtanh");
  ScalarType t = a[0].dtype;
  const std::optional<c10::IValue>& lo = a[1].constant;
  const bool lo_is_number = lo && lo->isScalar() && !std::isnan(lo->toScalar().toDouble());
  ExprId r = clampTo(b, a[0].expr, castTo(b, a[1], t), castTo(b, a[2], t), lo_is_number);
  return makeResult(r, t, {a[0]});
}

Operand lowerRelu6(IrBuilder& b, const Args& a) {
  TORCH_CHECK(a[0].dtype != ScalarType::Bool, "Bool inputs not supported for hardtanh");
  ScalarType t = a[0].dtype;
  return makeResult(clampTo(b, a[0].expr, literal(b, 0, t), literal(b, 6, t)), t, {a[0]});
}

// x > 0 ? x : x * negative_slope
Operand lowerLeakyRelu(IrBuilder& b, const Args& a) {
  return floatActivation(b, a, "leaky_relu", [&](ExprId x, ScalarType t) {
    ExprId positive = b.binary(IrOp::Gt, x, literal(b, 0, t));
    return b.select(positive, x, b.binary(IrOp::Mul, x, castToOpmath(b, a[1], t)));
  });
}

// x <= 0 ? expm1(x * input_scale) * (alpha * scale) : x * scale
Operand lowerElu(IrBuilder& b, const Args& a) {
  return floatActivation(b, a, "elu", [&](ExprId x, ScalarType t) {
    ExprId alpha = castToOpmath(b, a[1], t);
    ExprId scale = castToOpmath(b, a[2], t);
    ExprId inputScale = castToOpmath(b, a[3], t);
    ExprId negative = b.binary(IrOp::Mul, b.unary(IrOp::Expm1, b.binary(IrOp::Mul, x, inputScale)),
                               b.binary(IrOp::Mul, alpha, scale));
    ExprId nonPositive = b.binary(IrOp::Le, x, literal(b, 0, t));
    return b.select(nonPositive, negative, b.binary(IrOp::Mul, x, scale));
  });
}

// 'none': x * 0.5 * (1 + erf(x / sqrt(2)));
// 'tanh': 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
Operand lowerGelu(IrBuilder& b, const Args& a) {
  bool tanhApprox = constantString(a[1]) == "tanh";
  return floatActivation(b, a, "gelu", [&](ExprId x, ScalarType t) {
    ExprId half = literal(b, 0.5, t);
    ExprId one = literal(b, 1, t);
    if (!tanhApprox) {
      ExprId erf = b.unary(IrOp::Erf, b.binary(IrOp::Mul, x, literal(b, M_SQRT1_2, t)));
      return b.binary(IrOp::Mul, b.binary(IrOp::Mul, x, half), b.binary(IrOp::Add, one, erf));
    }
    const double kBeta = M_SQRT2 * M_2_SQRTPI * 0.5;
    ExprId cube = b.binary(IrOp::Mul, b.binary(IrOp::Mul, x, x), x);
    ExprId inner =
        b.binary(IrOp::Mul, literal(b, kBeta, t),
                 b.binary(IrOp::Add, x, b.binary(IrOp::Mul, literal(b, 0.044715, t), cube)));
    ExprId tanh = b.unary(IrOp::Tanh, inner);
    return b.binary(IrOp::Mul, b.binary(IrOp::Mul, half, x), b.binary(IrOp::Add, one, tanh));
  });
}

FusionDecision checkGeluApproximate(const torch::jit::Node* node) {
  std::optional<c10::IValue> mode = constantInput(node, "approximate");
  if (!mode) return FusionDecision::no("gelu: approximate is not a constant");
  const std::string& s = mode->toStringRef();
  if (s == "none" || s == "tanh") return FusionDecision::yes();
  return FusionDecision::no("gelu: unknown approximate '" + s + "'");  // eager raises
}

// gelu's derivative times the gradient, with eager's formulas (autodiff's backward of
// gelu): 'none': g * (cdf + x * pdf), cdf = 0.5 * (1 + erf(x / sqrt(2))), pdf =
// exp(-x^2 / 2) / sqrt(2 pi); 'tanh': g * (0.5 * (1 + t) + 0.5 * x * (1 - t^2) * beta *
// (1 + 3 * kappa * x^2)), t = tanh(beta * (x + kappa * x^3)). (grad, self, approximate)
Operand lowerGeluBackward(IrBuilder& b, const Args& a) {
  requireFloating(a[1], "gelu_backward");
  TORCH_CHECK(a[0].dtype == a[1].dtype, "fuser: gelu_backward of mixed dtypes");
  const ScalarType t = a[1].dtype;
  const ExprId x = a[1].expr;
  const ExprId half = literal(b, 0.5, t), one = literal(b, 1, t);
  const ExprId square = b.binary(IrOp::Mul, x, x);
  ExprId slope;
  if (constantString(a[2]) != "tanh") {
    const ExprId erf = b.unary(IrOp::Erf, b.binary(IrOp::Mul, x, literal(b, M_SQRT1_2, t)));
    const ExprId cdf = b.binary(IrOp::Mul, half, b.binary(IrOp::Add, one, erf));
    const ExprId pdf = b.binary(IrOp::Mul, literal(b, M_2_SQRTPI * M_SQRT1_2 * 0.5, t),
                                b.unary(IrOp::Exp, b.binary(IrOp::Mul, square, literal(b, -0.5, t))));
    slope = b.binary(IrOp::Add, cdf, b.binary(IrOp::Mul, x, pdf));
  } else {
    const double kBeta = M_SQRT2 * M_2_SQRTPI * 0.5, kKappa = 0.044715;
    const ExprId cube = b.binary(IrOp::Mul, square, x);
    const ExprId inner = b.binary(IrOp::Mul, literal(b, kBeta, t),
                                  b.binary(IrOp::Add, x, b.binary(IrOp::Mul, literal(b, kKappa, t), cube)));
    const ExprId tanh = b.unary(IrOp::Tanh, inner);
    const ExprId left = b.binary(IrOp::Mul, half, x);
    const ExprId left_slope = b.binary(IrOp::Mul, half, b.binary(IrOp::Add, one, tanh));
    const ExprId tanh_slope = b.binary(IrOp::Sub, one, b.binary(IrOp::Mul, tanh, tanh));
    const ExprId inner_slope = b.binary(
        IrOp::Mul, literal(b, kBeta, t),
        b.binary(IrOp::Add, one, b.binary(IrOp::Mul, literal(b, 3 * kKappa, t), square)));
    const ExprId right_slope =
        b.binary(IrOp::Mul, b.binary(IrOp::Mul, left, tanh_slope), inner_slope);
    slope = b.binary(IrOp::Add, left_slope, right_slope);
  }
  return makeResult(b.binary(IrOp::Mul, a[0].expr, slope), t, {a[0], a[1]});
}

FusionDecision checkGeluBackward(const torch::jit::Node* node) {
  auto grad = node->input(0)->type()->cast<c10::TensorType>();
  auto self = node->input(1)->type()->cast<c10::TensorType>();
  if (!grad || !self || !grad->scalarType() || grad->scalarType() != self->scalarType()) {
    return FusionDecision::no("gelu_backward of mixed or unprofiled dtypes");
  }
  return checkGeluApproximate(node);
}

// x / (1 + exp(-x)), as eager writes it.
Operand lowerSilu(IrBuilder& b, const Args& a) {
  return floatActivation(b, a, "silu", [&](ExprId x, ScalarType t) {
    ExprId denominator =
        b.binary(IrOp::Add, literal(b, 1, t), b.unary(IrOp::Exp, b.unary(IrOp::Neg, x)));
    return b.binary(IrOp::Div, x, denominator);
  });
}

// x * tanh(log1p(exp(x)))
Operand lowerMish(IrBuilder& b, const Args& a) {
  return floatActivation(b, a, "mish", [&](ExprId x, ScalarType t) {
    ExprId softplus = b.unary(IrOp::Log1p, b.unary(IrOp::Exp, x));
    return b.binary(IrOp::Mul, x, b.unary(IrOp::Tanh, softplus));
  });
}

// min(max(x + 3, 0), 6): the shared core of hardsigmoid and hardswish.
ExprId relu6Shifted(IrBuilder& b, ExprId x, ScalarType t) {
  return clampTo(b, b.binary(IrOp::Add, x, literal(b, 3, t)), literal(b, 0, t), literal(b, 6, t));
}

Operand lowerHardsigmoid(IrBuilder& b, const Args& a) {
  return floatActivation(b, a, "hardsigmoid", [&](ExprId x, ScalarType t) {
    return b.binary(IrOp::Div, relu6Shifted(b, x, t), literal(b, 6, t));
  });
}

// x * min(max(x + 3, 0), 6) / 6
Operand lowerHardswish(IrBuilder& b, const Args& a) {
  return floatActivation(b, a, "hardswish", [&](ExprId x, ScalarType t) {
    return b.binary(IrOp::Div, b.binary(IrOp::Mul, x, relu6Shifted(b, x, t)), literal(b, 6, t));
  });
}

// x * beta > threshold ? x : log1p(exp(x * beta)) / beta
Operand lowerSoftplus(IrBuilder& b, const Args& a) {
  return floatActivation(b, a, "softplus", [&](ExprId x, ScalarType t) {
    ExprId beta = castToOpmath(b, a[1], t);
    ExprId scaled = b.binary(IrOp::Mul, x, beta);
    ExprId linear = b.binary(IrOp::Gt, scaled, castToOpmath(b, a[2], t));
    ExprId smooth = b.binary(IrOp::Div, b.unary(IrOp::Log1p, b.unary(IrOp::Exp, scaled)), beta);
    return b.select(linear, x, smooth);
  });
}

}  // namespace

static RegisterOps activationsRegistration({
    {"aten::sigmoid(Tensor self) -> Tensor", lowerSigmoid},
    {"aten::relu(Tensor self) -> Tensor", lowerRelu},
    {"aten::relu6(Tensor self) -> Tensor", lowerRelu6},
    {"aten::leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor", lowerLeakyRelu},
    {"aten::elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor",
     lowerElu},
    {"aten::gelu(Tensor self, *, str approximate=\"none\") -> Tensor", lowerGelu,
     checkGeluApproximate},
    {"aten::gelu_backward(Tensor grad_output, Tensor self, *, str approximate=\"none\") -> "
     "Tensor", lowerGeluBackward, checkGeluBackward},
    {"aten::silu(Tensor self) -> Tensor", lowerSilu},
    {"aten::mish(Tensor self) -> Tensor", lowerMish},
    {"aten::hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor", lowerHardtanh},
    {"aten::hardsigmoid(Tensor self) -> Tensor", lowerHardsigmoid},
    {"aten::hardswish(Tensor self) -> Tensor", lowerHardswish},
    {"aten::softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor", lowerSoftplus},
});

}  // namespace fuser::ops
