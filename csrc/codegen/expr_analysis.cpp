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

int scalarArrayIndex(const Kernel& k, int slot) {
  bool is_double = k.scalars[slot] == ScalarArgKind::Double;
  int index = 0;
  for (int s = 0; s < slot; ++s) {
    if ((k.scalars[s] == ScalarArgKind::Double) == is_double) ++index;
  }
  return index;
}

}  // namespace fuser::codegen
