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
  // Per expression: whether it varies along the row, whether an output needs it, and
  // how many passes must be done before it is known (a reduction: its pass plus one).
  std::vector<bool> element;
  std::vector<bool> used;
  std::vector<int> ready;

  // For printers that keep a row's element values (in registers or a local buffer):
  // loop l (pass l, then the storing loop at l = passes.size()) computes, once, each
  // element value whose reductions are known after l passes (`loop`), loads in the
  // first loop that reads them; `held` marks the values a later loop reads again.
  std::vector<int> loop;
  std::vector<bool> held;
  // The loop a user of element values runs in: a reduction's pass, an element value's
  // own loop.
  int loopOf(const Kernel& k, ExprId id) const {
    return k.exprs[id].op == IrOp::Reduce ? ready[id] - 1 : loop[id];
  }
  // The loop that can store whole output `o`: the one computing its value.
  int storeLoop(const Kernel& k, size_t o) const {
    const ExprId value = k.outputs[o].value;
    return element[value] ? loop[value] : static_cast<int>(passes.size());
  }
  // Held values this loop reads: arguments of what it computes.
  std::vector<bool> readsIn(const Kernel& k, int loop) const;
  // The walk of a column kernel (Kernel::columns) that stores whole output `o`: the
  // first that knows its value, the pass after its last reduction's (a value needing
  // none: the first pass's, beside the sums it feeds), or the storing walk after the
  // last pass (passes.size()) for a value that is not an element's.
  int columnStoreWalk(const Kernel& k, size_t o) const {
    const ExprId value = k.outputs[o].value;
    return element[value] ? ready[value] : static_cast<int>(passes.size());
  }
};

// Throws c10::Error when a per-row output's value varies along the row (the runtime
// checks shapes, so this means the lowering and the runtime disagree).
RowSchedule scheduleRows(const Kernel& kernel);

// Whether input `index` of a row kernel holds one value per row (every dim of the row
// is broadcast): its loads are row-level.
inline bool rowLevelInput(const TensorInput& in) { return in.inner_zero_stride; }

}  // namespace fuser::codegen
