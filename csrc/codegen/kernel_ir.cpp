#include "codegen/kernel_ir.h"

#include <c10/util/Exception.h>

namespace fuser::codegen {

const char* irOpName(IrOp op) {
  switch (op) {
#define FUSER_IR_NAME(x) \
  case IrOp::x:          \
    return #x;
    FUSER_IR_NAME(Load) FUSER_IR_NAME(Scalar) FUSER_IR_NAME(Constant) FUSER_IR_NAME(Cast)
    FUSER_IR_NAME(Neg) FUSER_IR_NAME(Abs) FUSER_IR_NAME(Reciprocal) FUSER_IR_NAME(Sqrt)
    FUSER_IR_NAME(Rsqrt) FUSER_IR_NAME(Exp) FUSER_IR_NAME(Expm1) FUSER_IR_NAME(Log)
    FUSER_IR_NAME(Log1p) FUSER_IR_NAME(Log2) FUSER_IR_NAME(Log10) FUSER_IR_NAME(Sin)
    FUSER_IR_NAME(Cos) FUSER_IR_NAME(Tan) FUSER_IR_NAME(Asin) FUSER_IR_NAME(Acos)
    FUSER_IR_NAME(Atan) FUSER_IR_NAME(Sinh) FUSER_IR_NAME(Cosh) FUSER_IR_NAME(Tanh)
    FUSER_IR_NAME(Sigmoid) FUSER_IR_NAME(SigmoidHalf) FUSER_IR_NAME(Erf) FUSER_IR_NAME(Erfc)
    FUSER_IR_NAME(Floor)
    FUSER_IR_NAME(Ceil) FUSER_IR_NAME(Round) FUSER_IR_NAME(Trunc) FUSER_IR_NAME(Sign)
    FUSER_IR_NAME(RoundToHalf) FUSER_IR_NAME(RoundToBFloat16)
    FUSER_IR_NAME(IsNan) FUSER_IR_NAME(LogicalNot) FUSER_IR_NAME(BitwiseNot) FUSER_IR_NAME(Add)
    FUSER_IR_NAME(Sub) FUSER_IR_NAME(Mul) FUSER_IR_NAME(Div) FUSER_IR_NAME(Pow)
    FUSER_IR_NAME(Atan2) FUSER_IR_NAME(Fmod) FUSER_IR_NAME(Remainder) FUSER_IR_NAME(FloorDiv)
    FUSER_IR_NAME(Min) FUSER_IR_NAME(Max) FUSER_IR_NAME(Eq) FUSER_IR_NAME(Ne) FUSER_IR_NAME(Lt)
    FUSER_IR_NAME(Le) FUSER_IR_NAME(Gt) FUSER_IR_NAME(Ge) FUSER_IR_NAME(LogicalAnd)
    FUSER_IR_NAME(LogicalOr) FUSER_IR_NAME(LogicalXor) FUSER_IR_NAME(BitAnd)
    FUSER_IR_NAME(BitOr) FUSER_IR_NAME(BitXor) FUSER_IR_NAME(Select)
    FUSER_IR_NAME(Reduce) FUSER_IR_NAME(RowSize)
    FUSER_IR_NAME(ElementIndex) FUSER_IR_NAME(PhiloxUniform)
#undef FUSER_IR_NAME
  }
  return "?";
}

bool isComparison(IrOp op) {
  switch (op) {
    case IrOp::Eq: case IrOp::Ne: case IrOp::Lt: case IrOp::Le: case IrOp::Gt: case IrOp::Ge:
    case IrOp::LogicalAnd: case IrOp::LogicalOr: case IrOp::LogicalXor:
      return true;
    default:
      return false;
  }
}

ExprId IrBuilder::add(Expr e) {
  TORCH_INTERNAL_ASSERT(e.type != c10::ScalarType::Half && e.type != c10::ScalarType::BFloat16,
                        "kernel IR computes half types in float");
  k_.exprs.push_back(std::move(e));
  return static_cast<ExprId>(k_.exprs.size() - 1);
}

ExprId IrBuilder::load(int32_t input, c10::ScalarType type) {
  Expr e{IrOp::Load, computeType(type), {}};
  e.index = input;
  return add(std::move(e));
}

ExprId IrBuilder::scalar(int32_t slot, c10::ScalarType type) {
  Expr e{IrOp::Scalar, computeType(type), {}};
  e.index = slot;
  return add(std::move(e));
}

ExprId IrBuilder::constant(double value, c10::ScalarType type) {
  type = computeType(type);
  Expr e{IrOp::Constant, type, {}};
  if (c10::isFloatingType(type)) {
    e.fvalue = value;
  } else {
    e.ivalue = type == c10::ScalarType::Bool ? (value != 0) : static_cast<int64_t>(value);
  }
  return add(std::move(e));
}

ExprId IrBuilder::intConstant(int64_t value, c10::ScalarType type) {
  type = computeType(type);
  Expr e{IrOp::Constant, type, {}};
  if (c10::isFloatingType(type)) {
    e.fvalue = static_cast<double>(value);
  } else {
    e.ivalue = type == c10::ScalarType::Bool ? (value != 0) : value;
  }
  return add(std::move(e));
}

ExprId IrBuilder::cast(ExprId x, c10::ScalarType type) {
  type = computeType(type);
  if (typeOf(x) == type) return x;
  return add(Expr{IrOp::Cast, type, {x}});
}

ExprId IrBuilder::unary(IrOp op, ExprId x) {
  c10::ScalarType t = typeOf(x);
  if (op == IrOp::IsNan || op == IrOp::LogicalNot) t = c10::ScalarType::Bool;
  return add(Expr{op, t, {x}});
}

ExprId IrBuilder::binary(IrOp op, ExprId a, ExprId b) {
  TORCH_INTERNAL_ASSERT(typeOf(a) == typeOf(b), "kernel IR: ", irOpName(op),
                        " operands differ in type: ", typeOf(a), " vs ", typeOf(b));
  c10::ScalarType t = isComparison(op) ? c10::ScalarType::Bool : typeOf(a);
  return add(Expr{op, t, {a, b}});
}

ExprId IrBuilder::select(ExprId cond, ExprId a, ExprId b) {
  TORCH_INTERNAL_ASSERT(typeOf(cond) == c10::ScalarType::Bool, "kernel IR: select on non-bool");
  TORCH_INTERNAL_ASSERT(typeOf(a) == typeOf(b), "kernel IR: select branches differ in type");
  return add(Expr{IrOp::Select, typeOf(a), {cond, a, b}});
}

ExprId IrBuilder::reduce(ReduceKind kind, ExprId x, bool sum_in_type) {
  k_.rows = true;
  Expr e{IrOp::Reduce, typeOf(x), {x}};
  e.index = static_cast<int32_t>(kind);
  e.sum_in_type = sum_in_type;
  return add(std::move(e));
}

ExprId IrBuilder::rowSize(c10::ScalarType type) {
  k_.rows = true;
  return add(Expr{IrOp::RowSize, computeType(type), {}});
}

ExprId IrBuilder::elementIndex() { return add(Expr{IrOp::ElementIndex, c10::ScalarType::Long, {}}); }

ExprId IrBuilder::philoxUniform(ExprId seed, ExprId offset) {
  TORCH_INTERNAL_ASSERT(typeOf(seed) == c10::ScalarType::Long &&
                            typeOf(offset) == c10::ScalarType::Long,
                        "kernel IR: a Philox state is two Long values");
  return add(Expr{IrOp::PhiloxUniform, c10::ScalarType::Float, {seed, offset, elementIndex()}});
}

bool callsTrigonometry(const Kernel& k) {
  for (const Expr& e : k.exprs) {
    if (e.op == IrOp::Sin || e.op == IrOp::Cos || e.op == IrOp::Tan) return true;
  }
  return false;
}

bool drawsRandomNumbers(const Kernel& k) {
  for (const Expr& e : k.exprs) {
    if (e.op == IrOp::PhiloxUniform) return true;
  }
  return false;
}

}  // namespace fuser::codegen
