// Shared pieces of the op entries; see lowering_rules.h.
#include "ops/lowering_rules.h"

#include <torch/csrc/jit/ir/constants.h>

namespace fuser::ops {

using c10::ScalarType;

bool isNone(const Operand& o) { return o.expr < 0 && (!o.constant || o.constant->isNone()); }

std::optional<double> constantNumber(const Operand& o) {
  if (!o.constant) return std::nullopt;
  const c10::IValue& v = *o.constant;
  if (v.isDouble()) return v.toDouble();
  if (v.isInt()) return static_cast<double>(v.toInt());
  if (v.isBool()) return v.toBool() ? 1.0 : 0.0;
  return std::nullopt;
}

bool isConstant(const Operand& o, double value) {
  std::optional<double> v = constantNumber(o);
  return v && *v == value;
}

std::string constantString(const Operand& o) {
  TORCH_INTERNAL_ASSERT(o.constant && (o.constant->isString() || o.constant->isNone()),
                        "expected a constant string argument (the entry's check ensures it)");
  return o.constant->isNone() ? std::string() : o.constant->toStringRef();
}

ExprId literal(IrBuilder& b, double value, ScalarType dtype) {
  return b.constant(value, codegen::computeType(dtype));
}

ExprId castOther(IrBuilder& b, const Operand& other, ScalarType dtype) {
  const bool cpu = b.device() == c10::DeviceType::CPU;
  const bool opmath = other.category == Category::WrappedScalar ||
                      (cpu && other.category == Category::ZeroDimTensor);
  return opmath ? castToOpmath(b, other, dtype) : castTo(b, other, dtype);
}

void requireFloating(const Operand& x, const char* op) {
  TORCH_CHECK(c10::isFloatingType(x.dtype), op, " not implemented for '", x.dtype, "'");
}

void requireNotBool(const Operand& x, const char* op) {
  TORCH_CHECK(x.dtype != ScalarType::Bool, op, " not implemented for 'Bool'");
}

std::optional<c10::IValue> constantInput(const torch::jit::Node* node, const char* name) {
  return torch::jit::toIValue(node->namedInput(name));
}

FusionDecision requireConstant(const torch::jit::Node* node, const char* name) {
  if (constantInput(node, name)) return FusionDecision::yes();
  return FusionDecision::no(std::string("argument '") + name + "' of " +
                            node->kind().toQualString() + " is not a constant");
}

FusionDecision requireKnownPresence(const torch::jit::Node* node, const char* name) {
  const torch::jit::Value* v = node->namedInput(name);
  if (v->type()->kind() != c10::TypeKind::OptionalType || torch::jit::toIValue(v)) {
    return FusionDecision::yes();
  }
  return FusionDecision::no(std::string("optional argument '") + name + "' of " +
                            node->kind().toQualString() + " may be None at run time");
}

bool isProfiledRowMajor(const c10::TensorType& type) {
  return type.isComplete() &&
         *type.strides().concrete_sizes() == *type.contiguous()->strides().concrete_sizes();
}

Operand lowerUnaryKeepType(IrBuilder& b, const Args& a, IrOp op) {
  return makeResult(b.unary(op, a[0].expr), a[0].dtype, {a[0]});
}

Operand lowerUnaryToFloat(IrBuilder& b, const Args& a, IrOp op) {
  ScalarType t = toFloating(a[0].dtype);
  return makeResult(b.unary(op, castTo(b, a[0], t)), t, {a[0]});
}

Operand lowerBinaryPromoted(IrBuilder& b, const Args& a, IrOp op) {
  ScalarType t = resultType({a[0], a[1]});
  ExprId r = b.binary(op, castTo(b, a[0], t), castTo(b, a[1], t));
  return makeResult(r, t, {a[0], a[1]});
}

Operand lowerBinaryToFloat(IrBuilder& b, const Args& a, IrOp op) {
  ScalarType t = toFloating(resultType({a[0], a[1]}));
  ExprId r = b.binary(op, castTo(b, a[0], t), castTo(b, a[1], t));
  return makeResult(r, t, {a[0], a[1]});
}

Operand lowerComparison(IrBuilder& b, const Args& a, IrOp op) {
  ScalarType t = resultType({a[0], a[1]});
  ExprId r = b.binary(op, castTo(b, a[0], t), castTo(b, a[1], t));
  return makeResult(r, ScalarType::Bool, {a[0], a[1]});
}

}  // namespace fuser::ops
