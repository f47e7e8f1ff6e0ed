#include "codegen/native16.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cmath>
#include <cstdio>
#include <optional>

#include "codegen/expr_printer.h"

namespace fuser::codegen {
namespace {

using c10::ScalarType;

bool nativeArithmetic(const Expr& e) {
  return e.type == ScalarType::Float &&
         (e.op == IrOp::Add || e.op == IrOp::Sub || e.op == IrOp::Mul);
}

std::optional<ScalarType> roundingFormat(IrOp op) {
  if (op == IrOp::RoundToHalf) return ScalarType::Half;
  if (op == IrOp::RoundToBFloat16) return ScalarType::BFloat16;
  return std::nullopt;
}

// The float value of a constant operand (a constant, or a constant cast to float).
std::optional<float> constantValue(const Kernel& k, ExprId id) {
  const Expr* e = &k.exprs[id];
  if (e->type != ScalarType::Float) return std::nullopt;
  if (e->op == IrOp::Cast) e = &k.exprs[e->args[0]];
  if (e->op != IrOp::Constant) return std::nullopt;
  const bool floating = e->type == ScalarType::Float || e->type == ScalarType::Double;
  return floating ? static_cast<float>(e->fvalue) : static_cast<float>(e->ivalue);
}

// A constant's bits in `format` when the format holds it exactly (NaN never: its
// payload is the one thing a conversion may change).
std::optional<uint16_t> exactBits(float v, ScalarType format) {
  if (std::isnan(v)) return std::nullopt;
  if (format == ScalarType::Half) {
    const c10::Half h(v);
    return static_cast<float>(h) == v ? std::optional<uint16_t>(h.x) : std::nullopt;
  }
  const c10::BFloat16 b(v);
  return static_cast<float>(b) == v ? std::optional<uint16_t>(b.x) : std::nullopt;
}

bool holdsBits(const Kernel& k, const Native16& plan, ExprId arg, ScalarType format) {
  if (plan.bits[arg] == format) return true;
  const std::optional<float> c = constantValue(k, arg);
  return c && exactBits(*c, format);
}

}  // namespace

Native16 planNative16(const Kernel& k, const ExprFacts& facts) {
  const size_t n = k.exprs.size();
  Native16 plan{std::vector<ScalarType>(n, ScalarType::Undefined), std::vector<ExprId>(n, -1),
                std::vector<bool>(n, false)};
  // Uses of each value: by expressions, and the storage format of the outputs it is.
  std::vector<int> expr_uses(n, 0);
  std::vector<int> output_uses(n, 0);
  std::vector<ScalarType> output_format(n, ScalarType::Undefined);
  for (size_t i = 0; i < n; ++i) {
    if (!facts.used[i]) continue;
    for (ExprId a : k.exprs[i].args) ++expr_uses[a];
  }
  for (const TensorOutput& o : k.outputs) {
    ++output_uses[o.value];
    const bool same = output_format[o.value] == ScalarType::Undefined ||
                      output_format[o.value] == o.dtype;
    output_format[o.value] = same ? o.dtype : ScalarType::Float;  // mixed: none
  }
  auto operandsHold = [&](const Expr& op, ScalarType format) {
    return holdsBits(k, plan, op.args[0], format) && holdsBits(k, plan, op.args[1], format);
  };
  for (size_t i = 0; i < n; ++i) {
    const Expr& e = k.exprs[i];
    if (!facts.used[i] || e.type != ScalarType::Float) continue;
    if (e.op == IrOp::Load) {
      const ScalarType storage = k.inputs[e.index].dtype;
      if (storage == ScalarType::Half || storage == ScalarType::BFloat16) plan.bits[i] = storage;
      continue;
    }
    if (const std::optional<ScalarType> format = roundingFormat(e.op)) {
      plan.bits[i] = *format;
      const ExprId op = e.args[0];
      const Expr& inner = k.exprs[op];
      // The op is printed only as this rounding: its sole use, not an output.
      if (nativeArithmetic(inner) && expr_uses[op] == 1 && output_uses[op] == 0 &&
          operandsHold(inner, *format)) {
        plan.native_op[i] = op;
        plan.folded[op] = true;
      }
      continue;
    }
    // An op whose only uses are outputs of one 16-bit format: their stores round it.
    const ScalarType format = output_format[i];
    if (nativeArithmetic(e) && expr_uses[i] == 0 && !facts.invariant[i] &&
        (format == ScalarType::Half || format == ScalarType::BFloat16) &&
        operandsHold(e, format)) {
      plan.bits[i] = format;
      plan.native_op[i] = static_cast<ExprId>(i);
    }
  }
  return plan;
}

std::string native16Operand(const Kernel& k, const Native16& plan, ExprId arg,
                            ScalarType format) {
  if (plan.bits[arg] == format) return "v" + std::to_string(arg) + "_b";
  const std::optional<uint16_t> bits = exactBits(*constantValue(k, arg), format);
  char literal[32];
  std::snprintf(literal, sizeof(literal), "(uint16_t)0x%04x", static_cast<unsigned>(*bits));
  return literal;
}

std::string native16Op(const Kernel& k, const Native16& plan, ExprId i) {
  const Expr& op = k.exprs[plan.native_op[i]];
  const ScalarType format = plan.bits[i];
  const char* name = op.op == IrOp::Add ? "add" : op.op == IrOp::Sub ? "sub" : "mul";
  const std::string prefix = format == ScalarType::Half ? "fx_h" : "fx_bf";
  return prefix + name + "(" + native16Operand(k, plan, op.args[0], format) + ", " +
         native16Operand(k, plan, op.args[1], format) + ")";
}

std::string native16Bits(const Kernel& k, const Native16& plan, ExprId id,
                         const std::string& element) {
  const Expr& e = k.exprs[id];
  if (e.op == IrOp::Load) return element;
  if (plan.native_op[id] >= 0) return native16Op(k, plan, id);
  return storeConversion(plan.bits[id], "v" + std::to_string(e.args[0]));  // a rounding
}

void printNative16Value(std::ostream& out, const std::string& indent, ExprId id,
                        ScalarType format, const std::string& bits) {
  const std::string v = "v" + std::to_string(id);
  out << indent << "const uint16_t " << v << "_b = " << bits << ";\n"
      << indent << "const float " << v << " = "
      << (format == ScalarType::Half ? "fx_h2f(" : "fx_bf2f(") << v << "_b);\n";
}

}  // namespace fuser::codegen
