// Rows cut in slices: a row kernel (Kernel::rows) whose rows are too few to fill the
// machine runs as one kernel per stage instead of one, each over (row, slice) units.
// Stage p < passes computes pass p's reductions over its slice and writes the partial
// results; stage p + 1 combines the row's partials (all units of a row alike), and the
// last stage stores the outputs of its slice. Values pass between stages through
// buffers of one workspace per call (runtime/workspace_plan.h lays them out).
//
// Kernel::row_stage names the stage (-1: a whole row per unit, no stages). The slice
// count is the stage kernel's last integer argument, so one build serves every count;
// slice s of a row of n elements is [s * len, min(n, (s + 1) * len)), len = ceil(n / S)
// rounded up to whole vectors of Kernel::row_vector elements (CUDA's vector loads).
// The buffers' pointers follow the outputs' in every stage kernel's pointer array.
#pragma once

#include <c10/core/ScalarType.h>

#include <string>
#include <vector>

#include "codegen/kernel_ir.h"
#include "codegen/row_schedule.h"

namespace fuser::codegen {

struct SplitBuffer {
  enum class Kind {
    Partials,   // one element per unit (rows * slices): a reduction's slice results
    RowValues,  // one element per row: a reduction's combined value, for later stages
  } kind;
  ExprId reduce;
  c10::ScalarType type;
  int written;    // the stage that writes it
  int last_read;  // the last stage that reads it
  // The partials of a one-pass variance (row_printer.h's isWelford): each element is
  // a Welford triple of `type` (count, mean, squared deviations).
  bool welford = false;
  int64_t elementBytes() const {
    return static_cast<int64_t>(c10::elementSize(type)) * (welford ? 3 : 1);
  }
};

// The C type of one element of `buffer` in a stage kernel of `kernel`.
std::string splitBufferTypeName(const Kernel& kernel, const SplitBuffer& buffer);

// The stages of a row kernel cut in slices: one per pass, then the storing one.
inline int splitStages(const RowSchedule& s) { return static_cast<int>(s.passes.size()) + 1; }

// Every buffer the stages of `kernel` use, in the order of their pointers. A pass's
// partials are written by its stage and combined by the next; that stage also writes the
// combined values when a later stage needs them.
std::vector<SplitBuffer> splitBuffers(const Kernel& kernel, const RowSchedule& schedule);

// The index of the buffer of `kind` holding reduction `reduce`'s values; -1: none.
int splitBufferOf(const std::vector<SplitBuffer>& buffers, SplitBuffer::Kind kind, ExprId reduce);

// Whether `kernel` is the last stage and stores per-row outputs only (a column kernel's
// whole outputs of earlier walks are stored by earlier stages): it then runs one
// unit per row (LaunchArgs::numel = rows; CUDA columns: cudaColumnThreads(rows, 1)
// threads, one row each), the first slice's.
bool lastStagePerRow(const Kernel& kernel, const RowSchedule& schedule);

// What a reduction's slices accumulate in: the CPU sums float in double (as its whole
// rows do), everything else in the reduction's own type.
c10::ScalarType partialType(const Kernel& kernel, const Expr& reduce);

}  // namespace fuser::codegen
