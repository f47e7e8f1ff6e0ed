// Facts about a kernel's expressions that both printers need: which are reachable
// from the outputs, and which do not vary per element (hoisted out of the loop).
#pragma once

#include <vector>

#include "codegen/kernel_ir.h"

namespace fuser::codegen {

struct ExprFacts {
  std::vector<bool> used;       // reachable from an output
  std::vector<bool> invariant;  // same value for every element
};

ExprFacts analyzeExprs(const Kernel& kernel);

// Which expressions a strided kernel computes once per row rather than per element:
// loads of strided inputs broadcast along the innermost dim (a squeeze-excite gate's
// s [N, C, 1, 1]), and what is computed from them and invariants alone. Draws and
// element indices vary along the row.
std::vector<bool> perRowExprs(const Kernel& kernel, const ExprFacts& facts);

// Rough work per element in units of one add: loads, stores and simple ops cost 1,
// divisions and square roots 4, exp, log, trigonometric and similar functions 16.
int elementCost(const Kernel& kernel);
// The cost of one operation in the same units.
int opCost(IrOp op);
// What computing `e` again costs in a CPU kernel, in the same units: a rounding to
// float16 (fx_round_h, a dozen vector operations) about as much as an exp, one to
// bfloat16 as a division, a float16 load's conversion 3, a bfloat16 load's 2. One core,
// per element: a multiply 0.05 ns, a division 0.12, a float16 rounding 0.27 (0.31 as
// fx_h2f(fx_f2h)), a bfloat16 one 0.11.
int cpuRecomputeCost(const Kernel& kernel, const Expr& e);

// Scalar arguments are passed in two arrays (doubles, and int64/bool); the position
// of scalar `slot` in its array.
int scalarArrayIndex(const Kernel& kernel, int slot);

}  // namespace fuser::codegen
