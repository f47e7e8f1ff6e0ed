#include "codegen/expr_analysis.h"

namespace fuser::codegen {

ExprFacts analyzeExprs(const Kernel& k) {
  const size_t n = k.exprs.size();
  ExprFacts f{std::vector<bool>(n, false), std::vector<bool>(n, false)};
  for (const TensorOutput& o : k.outputs) f.used[o.value] = true;
  for (size_t i = n; i-- > 0;) {
    if (!f.used[i]) continue;
    for (ExprId a : k.exprs[i].args) f.used[a] = true;
  }
  for (size_t i = 0; i < n; ++i) {
    const Expr& e = k.exprs[i];
    if (e.op == IrOp::Load) {
      f.invariant[i] = k.inputs[e.index].access == Access::Broadcast1;
    } else if (e.op == IrOp::ElementIndex) {
      f.invariant[i] = false;
    } else if (e.op == IrOp::Scalar || e.op == IrOp::Constant) {
      f.invariant[i] = true;
    } else {
      bool all = true;
      for (ExprId a : e.args) all = all && f.invariant[a];
      f.invariant[i] = all;
    }
  }
  return f;
}

std::vector<bool> perRowExprs(const Kernel& k, const ExprFacts& facts) {
  std::vector<bool> per_row(k.exprs.size(), false);
  for (size_t i = 0; i < k.exprs.size(); ++i) {
    const Expr& e = k.exprs[i];
    if (!facts.used[i] || facts.invariant[i]) continue;
    if (e.op == IrOp::Load) {
      const TensorInput& in = k.inputs[e.index];
      per_row[i] = in.access == Access::Strided && in.inner_zero_stride;
      continue;
    }
    if (e.op == IrOp::ElementIndex || e.op == IrOp::PhiloxUniform) continue;
    bool all = true;
    for (ExprId a : e.args) all = all && (facts.invariant[a] || per_row[a]);
    per_row[i] = all;
  }
  return per_row;
}

int opCost(IrOp op) {
  switch (op) {
    case IrOp::Scalar:
    case IrOp::Constant: return 0;
    case IrOp::Div:
    case IrOp::Reciprocal:
    case IrOp::Sqrt:
    case IrOp::Rsqrt:
    case IrOp::Fmod:
    case IrOp::Remainder:
    case IrOp::FloorDiv: return 4;
    case IrOp::Exp: case IrOp::Expm1: case IrOp::Log: case IrOp::Log1p: case IrOp::Log2:
    case IrOp::Log10: case IrOp::Sin: case IrOp::Cos: case IrOp::Tan: case IrOp::Asin:
    case IrOp::Acos: case IrOp::Atan: case IrOp::Sinh: case IrOp::Cosh: case IrOp::Tanh:
    case IrOp::Sigmoid: case IrOp::SigmoidHalf: case IrOp::Erf: case IrOp::Erfc: case IrOp::Pow:
    case IrOp::Atan2:
      return 16;
    case IrOp::PhiloxUniform: return 32;  // ten rounds of two 32-bit multiplies
    default: return 1;
  }
}

int cpuRecomputeCost(const Kernel& k, const Expr& e) {
  switch (e.op) {
    case IrOp::Load:
      switch (k.inputs[e.index].dtype) {
        case c10::ScalarType::Half: return 3;
        case c10::ScalarType::BFloat16: return 2;
        default: return 1;
      }
    case IrOp::RowSize: return 0;
    case IrOp::RoundToHalf: return 16;
    case IrOp::RoundToBFloat16: return 4;
    default: return opCost(e.op);
  }
}

int elementCost(const Kernel& k) {
  const ExprFacts facts = analyzeExprs(k);
  int cost = static_cast<int>(k.outputs.size());  // the stores
  for (size_t i = 0; i < k.exprs.size(); ++i) {
    if (facts.used[i] && !facts.invariant[i]) cost += opCost(k.exprs[i].op);
  }
  return cost;
}

int scalarArrayIndex(const Kernel& k, int slot) {
  bool is_double = k.scalars[slot] == ScalarArgKind::Double;
  int index = 0;
  for (int s = 0; s < slot; ++s) {
    if ((k.scalars[s] == ScalarArgKind::Double) == is_double) ++index;
  }
  return index;
}

}  // namespace fuser::codegen
