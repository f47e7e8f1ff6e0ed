#include "codegen/centred_squares.h"

namespace fuser::codegen {
namespace {

bool isFloatOrDouble(c10::ScalarType t) {
  return t == c10::ScalarType::Float || t == c10::ScalarType::Double;
}

// Whether `m` is the row mean of `x`: Sum(x) over the row divided by the row's size.
bool isRowMeanOf(const Kernel& k, ExprId m, ExprId x) {
  const Expr& e = k.exprs[m];
  if (e.op != IrOp::Div) return false;
  const Expr& sum = k.exprs[e.args[0]];
  return sum.op == IrOp::Reduce && sum.index == static_cast<int32_t>(ReduceKind::Sum) &&
         sum.args[0] == x && k.exprs[e.args[1]].op == IrOp::RowSize;
}

// x, where `d` is x - mean(x) or mean(x) - x; -1 otherwise.
ExprId centredValue(const Kernel& k, ExprId d) {
  const Expr& e = k.exprs[d];
  if (e.op != IrOp::Sub) return -1;
  if (isRowMeanOf(k, e.args[1], e.args[0])) return e.args[0];
  if (isRowMeanOf(k, e.args[0], e.args[1])) return e.args[1];
  return -1;
}

// The centred value both factors of `square` are (one difference, or two written alike,
// as `(x - u) * (x - u)` lowers); -1 otherwise.
ExprId squaredCentredValue(const Kernel& k, ExprId square) {
  const Expr& e = k.exprs[square];
  if (e.op != IrOp::Mul) return -1;
  const Expr& a = k.exprs[e.args[0]];
  const Expr& b = k.exprs[e.args[1]];
  const bool same = e.args[0] == e.args[1] || (a.op == IrOp::Sub && b.op == IrOp::Sub && a.args == b.args);
  return same ? centredValue(k, e.args[0]) : -1;
}

}  // namespace

void foldCentredSquares(Kernel& k) {
  for (Expr& e : k.exprs) {
    if (e.op != IrOp::Reduce || e.index != static_cast<int32_t>(ReduceKind::Sum)) continue;
    if (!isFloatOrDouble(e.type)) continue;
    const ExprId x = squaredCentredValue(k, e.args[0]);
    if (x < 0 || k.exprs[x].type != e.type) continue;
    e.index = static_cast<int32_t>(ReduceKind::SquaredDeviations);
    e.args = {x};
    e.sum_in_type = false;
  }
}

}  // namespace fuser::codegen
