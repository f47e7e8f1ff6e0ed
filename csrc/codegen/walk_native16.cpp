#include "codegen/walk_native16.h"

#include <algorithm>

#include "codegen/expr_analysis.h"
#include "codegen/expr_printer.h"

namespace fuser::codegen {
namespace {

bool isRounding(const Expr& e) {
  return e.op == IrOp::RoundToHalf || e.op == IrOp::RoundToBFloat16;
}

}  // namespace

WalkNative16::WalkNative16(const Kernel& k) : k_(k) {
  const ExprFacts facts = analyzeExprs(k);
  ops_ = planNative16(k, facts);
  std::vector<int> uses(k.exprs.size(), 0);
  for (size_t i = 0; i < k.exprs.size(); ++i) {
    if (!facts.used[i]) continue;
    for (ExprId a : k.exprs[i].args) ++uses[a];
  }
  for (const TensorOutput& o : k.outputs) uses[o.value] += 2;  // an output: never folded
  rounding_of_.assign(k.exprs.size(), -1);
  for (size_t r = 0; r < k.exprs.size(); ++r) {
    const ExprId op = ops_.native_op[r];
    if (op >= 0 && ops_.folded[op]) rounding_of_[op] = static_cast<ExprId>(r);
    const Expr& e = k.exprs[r];
    if (!isRounding(e)) continue;
    // fx_hquot's rule holds for operands that are values of the format (checked on
    // every pair): a float divisor may be too small for its reciprocal, say.
    const c10::ScalarType format = ops_.bits[r];
    const Expr& div = k.exprs[e.args[0]];
    if (div.op == IrOp::Div && div.type == c10::ScalarType::Float && uses[e.args[0]] == 1 &&
        ops_.bits[div.args[0]] == format && ops_.bits[div.args[1]] == format) {
      rounding_of_[e.args[0]] = static_cast<ExprId>(r);
    }
  }
}

// The division `rounding` rounds, where the walk computes both and not the divisor:
// -1 elsewhere.
ExprId WalkNative16::quotientOf(ExprId rounding, const std::vector<bool>& here) const {
  const Expr& e = k_.exprs[rounding];
  if (!isRounding(e)) return -1;
  const ExprId d = e.args[0];
  if (k_.exprs[d].op != IrOp::Div || rounding_of_[d] != rounding) return -1;
  if (!here[d] || here[k_.exprs[d].args[1]]) return -1;
  return d;
}

// An op the walk prints only as the rounding that computes it (natively, or as a
// quotient), where that rounding is in the walk.
bool WalkNative16::printedAsRounding(ExprId id, const std::vector<bool>& here) const {
  const ExprId r = rounding_of_[id];
  if (r < 0 || !here[r]) return false;
  return ops_.folded[id] ? ops_.native_op[r] == id : quotientOf(r, here) == id;
}

void WalkNative16::print(std::ostream& out, const std::vector<ExprId>& elements,
                         const std::string& indent,
                         const std::function<std::string(const Expr&)>& raw,
                         const std::function<std::string(const Expr&)>& load,
                         const std::string& redo) const {
  std::vector<bool> here(k_.exprs.size(), false), converted(k_.exprs.size(), false);
  for (ExprId id : elements) here[id] = true;
  for (ExprId id : elements) {
    const ExprId op = ops_.native_op[id];
    if (op < 0) continue;
    const c10::ScalarType format = ops_.bits[id];
    for (ExprId a : k_.exprs[op].args) {
      if (here[a] || converted[a] || ops_.bits[a] != format) continue;
      converted[a] = true;
      out << indent << "const uint16_t v" << a << "_b = "
          << storeConversion(format, "v" + std::to_string(a)) << ";\n";
    }
  }
  for (ExprId id : elements) {
    const Expr& e = k_.exprs[id];
    const std::string v = "v" + std::to_string(id);
    const c10::ScalarType format = ops_.bits[id];
    if (rounding_of_[id] >= 0 && printedAsRounding(id, here)) continue;
    if (format == c10::ScalarType::Undefined) {
      out << indent << "const " << computeTypeName(e.type) << " " << v << " = "
          << formatExpr(k_, e, load) << ";\n";
      continue;
    }
    std::string bits;
    if (const ExprId d = quotientOf(id, here); d >= 0) {
      const std::string a = "v" + std::to_string(k_.exprs[d].args[0]);
      const std::string b = "v" + std::to_string(k_.exprs[d].args[1]);
      const std::string f = format == c10::ScalarType::Half ? "fx_hquot" : "fx_bfquot";
      bits = redo.empty() ? f + "(" + a + ", " + b + ", 1.0f / " + b + ")"
                          : f + "_quick(" + a + ", 1.0f / " + b + ", " + redo +
                                quickSuffix(format) + ")";
    } else {
      bits = native16Bits(k_, ops_, id, e.op == IrOp::Load ? raw(e) : "");
    }
    printNative16Value(out, indent, id, format, bits);
  }
}

std::vector<c10::ScalarType> WalkNative16::quotientFormats(
    const std::vector<ExprId>& elements) const {
  std::vector<bool> here(k_.exprs.size(), false);
  for (ExprId id : elements) here[id] = true;
  std::vector<c10::ScalarType> formats;
  for (ExprId id : elements) {
    const c10::ScalarType f = ops_.bits[id];
    const bool listed = std::find(formats.begin(), formats.end(), f) != formats.end();
    if (quotientOf(id, here) >= 0 && !listed) formats.push_back(f);
  }
  return formats;
}

std::string WalkNative16::quickSuffix(c10::ScalarType format) {
  return format == c10::ScalarType::Half ? "_h" : "_bf";
}

std::string WalkNative16::quickRedo(c10::ScalarType format, const std::string& redo) {
  return std::string(format == c10::ScalarType::Half ? "fx_hquot_redo(" : "fx_bfquot_redo(") +
         redo + quickSuffix(format) + ")";
}

std::string WalkNative16::stored(size_t o, const std::vector<ExprId>& elements) const {
  const TensorOutput& out = k_.outputs[o];
  const std::string v = "v" + std::to_string(out.value);
  const bool bits = ops_.bits[out.value] == out.dtype && k_.exprs[out.value].op != IrOp::Load &&
                    std::find(elements.begin(), elements.end(), out.value) != elements.end();
  return bits ? v + "_b" : storeConversion(out.dtype, v);
}

}  // namespace fuser::codegen
