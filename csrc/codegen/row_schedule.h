// The order a row kernel (Kernel::rows) computes its expressions in, for both printers.
// Per row: the row-level expressions that need no reduction; then one pass over the
// row's elements per stage of reductions (a reduction whose operand reads an earlier
// reduction, as the sum of softmax reads the maximum, waits for the next pass), each
// followed by the row-level expressions it made computable; then the per-row outputs,
// and a last pass that computes and stores the whole outputs.
#pragma once

#include <vector>

#include "codegen/kernel_ir.h"

namespace fuser::codegen {

struct RowSchedule {
  std::vector<ExprId> constants;  // the same for every row: scalars, literals, the row size
  std::vector<ExprId> row_start;  // per row, before the first pass
  struct Pass {
    std::vector<ExprId> element;  // per element, in the pass's loop
    std::vector<ExprId> reduces;  // combined in the loop
    std::vector<ExprId> after;    // per row, once the pass's reductions are known
  };
  std::vector<Pass> passes;
  std::vector<ExprId> final_element;  // per element, in the storing loop
};

// Throws c10::Error when a per-row output's value varies along the row (the runtime
// checks shapes, so this means the lowering and the runtime disagree).
RowSchedule scheduleRows(const Kernel& kernel);

// Whether input `index` of a row kernel holds one value per row (every dim of the row
// is broadcast): its loads are row-level.
inline bool rowLevelInput(const TensorInput& in) { return in.inner_zero_stride; }

}  // namespace fuser::codegen
