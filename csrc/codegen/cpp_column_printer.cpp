// CPU row kernels whose rows are neighbours in memory (Kernel::columns: a sum over the
// leading dims, say). Walking such a row alone reads one element per cache line and
// comes back for the next row's (8x eager's time for a column sum of 8192 x 768), so a
// task takes its rows in blocks of up to kCpuColumnBlock and walks a block's rows
// together: for each element of the row, a vector loop over the block's rows reads
// neighbouring values, and a block as wide as the tensor streams through memory. Every
// value known per row (row_start, a pass's reductions and what follows them) lives in
// an array of one entry per row of the block; each loop over the block reads back the
// entries it needs. Rows cut in slices (split_rows.h) number their units slice by
// slice, rows innermost, as CUDA's columns do. Only per-row outputs are stored (the
// runtime gives such kernels no whole output), and nothing is drawn at random.
#include <c10/util/Exception.h>

#include <algorithm>
#include <functional>
#include <sstream>

#include "codegen/common_prelude.h"
#include "codegen/cpp_prelude.h"
#include "codegen/expr_printer.h"
#include "codegen/row_printer.h"
#include "codegen/row_schedule.h"
#include "codegen/split_rows.h"

namespace fuser::codegen {
namespace {

class CppColumnPrinter {
 public:
  explicit CppColumnPrinter(const Kernel& k) : k_(k), s_(scheduleRows(k)) {
    for (const TensorOutput& o : k.outputs) {
      TORCH_CHECK(o.per_row, "fuser: CPU column kernels store per-row outputs only");
    }
    for (const Expr& e : k.exprs) {
      TORCH_CHECK(e.op != IrOp::ElementIndex, "fuser: CPU column kernels draw no random numbers");
    }
    constant_.assign(k.exprs.size(), false);
    for (ExprId id : s_.constants) constant_[id] = true;
  }

  std::string print() {
    const bool staged = k_.row_stage >= 0;
    const int passes = static_cast<int>(s_.passes.size());
    // A stage before the last walks its slice; the last stores the per-row outputs.
    const bool slices = staged && k_.row_stage < passes;
    out_ << kCppPrelude << kCommonPrelude << kRowHelpers << "\nextern \"C\" void " << k_.name
         << "(void* const* fx_ptrs, const int64_t* fx_sizes, const int64_t* fx_strides,\n"
         << "    const double* fx_dargs, const int64_t* fx_iargs, int32_t* fx_error,\n"
         << "    int64_t fx_begin, int64_t fx_end) {\n";
    printRowPointers(out_, k_, "fx_ptrs", "fx_strides");
    out_ << "  (void)fx_dargs; (void)fx_iargs; (void)fx_error;\n";
    if (staged) printSplitBufferPointers(out_, k_, s_, "fx_ptrs");
    printRowExprs(out_, k_, s_.constants, "  ", "0");
    const int b = kCpuColumnBlock;
    for (size_t i = 0; i < k_.inputs.size(); ++i) out_ << "  int64_t fx_off" << i << "[" << b << "];\n";
    for (size_t id = 0; id < k_.exprs.size(); ++id) {
      if (!perRow(static_cast<ExprId>(id))) continue;
      out_ << "  " << computeTypeName(k_.exprs[id].type) << " fx_c" << id << "[" << b << "];\n";
    }
    out_ << "  int64_t fx_rows = 1;\n";
    for (int d = 0; d < k_.outer_ndim; ++d) out_ << "  fx_rows *= fx_sizes[" << d << "];\n";
    const std::string splits = staged ? "fx_iargs[" + std::to_string(splitCountArg(k_)) + "]" : "1";
    out_ << "  const int64_t fx_splits = " << splits << "; (void)fx_splits;\n"
         << "  for (int64_t fx_u0 = fx_begin, fx_nb = 0; fx_u0 < fx_end; fx_u0 += fx_nb) {\n"
         << "    const int64_t fx_s = fx_u0 / fx_rows, fx_r0 = fx_u0 - fx_s * fx_rows;\n"
         << "    fx_nb = fx_rows - fx_r0 < fx_end - fx_u0 ? fx_rows - fx_r0 : fx_end - fx_u0;\n"
         << "    if (fx_nb > " << b << ") fx_nb = " << b << ";\n";
    if (slices) {
      out_ << "    const int64_t fx_len = (fx_n + fx_splits - 1) / fx_splits;\n"
           << "    const int64_t fx_lo = fx_s * fx_len < fx_n ? fx_s * fx_len : fx_n;\n"
           << "    const int64_t fx_hi = fx_lo + fx_len < fx_n ? fx_lo + fx_len : fx_n;\n";
    } else {
      out_ << "    const int64_t fx_lo = 0, fx_hi = fx_n;\n";
    }
    out_ << "    (void)fx_lo; (void)fx_hi;\n";
    // The block's offsets and what each row computes before its first pass.
    openRows();
    out_ << "      const int64_t fx_r = fx_r0 + fx_j;\n";
    printRowOffsets(out_, k_, "      ");
    for (size_t i = 0; i < k_.inputs.size(); ++i) out_ << "      fx_off" << i << "[fx_j] = off" << i << ";\n";
    printRowExprs(out_, k_, s_.row_start, "      ", "0");
    keep(s_.row_start);
    closeRows();
    if (staged) printFinished();
    if (slices) {
      printPass(s_.passes[k_.row_stage], /*partials=*/true);
    } else if (!staged) {
      for (const RowSchedule::Pass& pass : s_.passes) printPass(pass, /*partials=*/false);
    }
    if (!slices) {
      std::vector<ExprId> stored;
      for (const TensorOutput& o : k_.outputs) stored.push_back(o.value);
      openRows();
      bringIn({}, stored, "      ", /*offsets=*/false);
      out_ << "      const int64_t fx_r = fx_r0 + fx_j;\n";
      printPerRowStores(out_, k_, "      ");
      closeRows();
    }
    out_ << "  }\n}\n";
    return out_.str();
  }

 private:
  // A value known once per row (not per element, not the same for every row).
  bool perRow(ExprId id) const { return !s_.element[id] && !constant_[id]; }

  void openRows() { out_ << "    for (int64_t fx_j = 0; fx_j < fx_nb; ++fx_j) {\n"; }
  void closeRows() { out_ << "    }\n"; }

  // Row fx_j's entries of the per-row values that `ids` read (and `also`), as vI, and
  // where `offsets`, its offsets as offI.
  void bringIn(const std::vector<ExprId>& ids, const std::vector<ExprId>& also,
               const std::string& indent, bool offsets) {
    std::vector<bool> printed(k_.exprs.size(), false), needed(k_.exprs.size(), false);
    for (ExprId id : ids) printed[id] = true;
    for (ExprId id : ids) {
      for (ExprId a : k_.exprs[id].args) needed[a] = true;
    }
    for (ExprId id : also) needed[id] = true;
    for (size_t i = 0; offsets && i < k_.inputs.size(); ++i) {
      out_ << indent << "const int64_t off" << i << " = fx_off" << i << "[fx_j]; (void)off" << i
           << ";\n";
    }
    for (size_t id = 0; id < k_.exprs.size(); ++id) {
      if (!needed[id] || printed[id] || !perRow(static_cast<ExprId>(id))) continue;
      out_ << indent << "const " << computeTypeName(k_.exprs[id].type) << " v" << id << " = fx_c"
           << id << "[fx_j];\n";
    }
  }

  // Stores row fx_j's entries of `ids`.
  void keep(const std::vector<ExprId>& ids) {
    for (ExprId id : ids) {
      if (perRow(id)) out_ << "      fx_c" << id << "[fx_j] = v" << id << ";\n";
    }
  }

  // A stage's view of the passes before it: their partials combined per row (or their
  // values read back), and what each row computes from them.
  void printFinished() {
    std::vector<ExprId> finished;
    for (int p = 0; p < k_.row_stage; ++p) {
      finished.insert(finished.end(), s_.passes[p].reduces.begin(), s_.passes[p].reduces.end());
      finished.insert(finished.end(), s_.passes[p].after.begin(), s_.passes[p].after.end());
    }
    openRows();
    out_ << "      const int64_t fx_r = fx_r0 + fx_j;\n";
    bringIn(finished, {}, "      ", /*offsets=*/true);
    printFinishedPasses(out_, k_, s_, "      ", "fx_s == 0");
    keep(finished);
    closeRows();
  }

  // Float sums in double, as the CPU's whole rows add them.
  static const char* accumulatorType(const Expr& e) {
    const bool wide = e.type == c10::ScalarType::Float && !e.sum_in_type &&
                      static_cast<ReduceKind>(e.index) == ReduceKind::Sum;
    return wide ? "double" : computeTypeName(e.type);
  }

  // One walk over elements [fx_lo, fx_hi) of the block's rows: per element, its offset
  // in each input, then the rows in a vector loop, each accumulating into its own entry.
  // `partials`: a stage's slice, whose accumulators go to the workspace as they are.
  void printPass(const RowSchedule::Pass& pass, bool partials) {
    const int b = kCpuColumnBlock;
    for (ExprId r : pass.reduces) {
      const Expr& e = k_.exprs[r];
      out_ << "    " << accumulatorType(e) << " fx_acc" << r << "[" << b << "];\n"
           << "    for (int64_t fx_j = 0; fx_j < fx_nb; ++fx_j) fx_acc" << r << "[fx_j] = "
           << reduceIdentity(e) << ";\n";
    }
    out_ << "    for (int64_t fx_e = fx_lo; fx_e < fx_hi; ++fx_e) {\n";
    printElementOffsets();
    // One outer dim whose stride is 1 in every input the pass reads (a contiguous tensor
    // reduced over its leading dims): row fx_j of input I at fx_b<I> + fx_j, vector
    // loads. Otherwise each row's own offset.
    std::vector<bool> read(k_.inputs.size(), false);
    for (ExprId id : pass.element) {
      if (k_.exprs[id].op == IrOp::Load) read[k_.exprs[id].index] = true;
    }
    std::string unit = "true";
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      out_ << "      const int64_t fx_b" << i << " = fx_off" << i << "[0] + fx_eo" << i
           << "; (void)fx_b" << i << ";\n";
      if (read[i]) unit += " && st" + std::to_string(i) + "[0] == 1";
    }
    if (k_.outer_ndim == 1) {
      out_ << "      if (" << unit << ") {\n";
      printElementLoop(pass, [](const std::string& n) { return "fx_b" + n + " + fx_j"; });
      out_ << "      } else {\n";
    }
    printElementLoop(pass, [](const std::string& n) { return "fx_off" + n + "[fx_j] + fx_eo" + n; });
    if (k_.outer_ndim == 1) out_ << "      }\n";
    out_ << "    }\n";
    if (partials) {
      const std::vector<SplitBuffer> buffers = splitBuffers(k_, s_);
      openRows();
      for (size_t buf = 0; buf < buffers.size(); ++buf) {
        if (buffers[buf].kind != SplitBuffer::Kind::Partials) continue;
        if (std::find(pass.reduces.begin(), pass.reduces.end(), buffers[buf].reduce) ==
            pass.reduces.end()) {
          continue;
        }
        out_ << "      fx_buf" << buf << "[fx_u0 + fx_j] = (" << computeTypeName(buffers[buf].type)
             << ")fx_acc" << buffers[buf].reduce << "[fx_j];\n";
      }
      closeRows();
      return;
    }
    // The reductions, and what each row computes from them.
    openRows();
    for (ExprId r : pass.reduces) {
      const char* t = computeTypeName(k_.exprs[r].type);
      out_ << "      const " << t << " v" << r << " = (" << t << ")fx_acc" << r << "[fx_j];\n";
    }
    std::vector<ExprId> known(pass.after);
    known.insert(known.end(), pass.reduces.begin(), pass.reduces.end());
    bringIn(known, {}, "      ", /*offsets=*/true);
    printRowExprs(out_, k_, pass.after, "      ", "0");
    keep(pass.reduces);
    keep(pass.after);
    closeRows();
  }

  // fx_eo<I>: where element fx_e of a row lies from the row's start, in input I.
  void printElementOffsets() {
    const int first = k_.outer_ndim, last = k_.outer_ndim + k_.inner_ndim - 1;
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      out_ << "      int64_t fx_eo" << i << " = "
           << (k_.inner_ndim == 1 ? "fx_e * st" + std::to_string(i) + "[" + std::to_string(first) + "]"
                                  : std::string("0"))
           << ";\n";
    }
    if (k_.inner_ndim == 1) return;
    out_ << "      {\n        int64_t fx_q = fx_e;\n";
    for (int d = last; d >= first; --d) {
      out_ << "        { const int64_t fx_idx = fx_q % fx_sizes[" << d << "]; fx_q /= fx_sizes[" << d
           << "];";
      for (size_t i = 0; i < k_.inputs.size(); ++i) {
        out_ << " fx_eo" << i << " += fx_idx * st" << i << "[" << d << "];";
      }
      out_ << " }\n";
    }
    out_ << "      }\n";
  }

  // The vector loop over the block's rows for element fx_e: the pass's element values,
  // input I read at `at(I)`, and each row's accumulators.
  void printElementLoop(const RowSchedule::Pass& pass,
                        const std::function<std::string(const std::string&)>& at) {
    std::vector<ExprId> operands;
    for (ExprId r : pass.reduces) operands.push_back(k_.exprs[r].args[0]);
    out_ << "      #pragma omp simd\n      for (int64_t fx_j = 0; fx_j < fx_nb; ++fx_j) {\n";
    bringIn(pass.element, operands, "        ", /*offsets=*/false);
    auto load = [&](const Expr& e) {
      const std::string n = std::to_string(e.index);
      return loadConversion(k_.inputs[e.index].dtype, e.type, "in" + n + "[" + at(n) + "]");
    };
    printRowExprs(out_, k_, pass.element, "        ", load);
    for (ExprId r : pass.reduces) {
      const Expr& e = k_.exprs[r];
      const std::string a = accumulatorType(e);
      out_ << "        fx_acc" << r << "[fx_j] = " << reduceCombiner(e) << "<" << a << ">(fx_acc" << r
           << "[fx_j], (" << a << ")v" << e.args[0] << ");\n";
    }
    out_ << "      }\n";
  }

  const Kernel& k_;
  RowSchedule s_;
  std::vector<bool> constant_;
  std::ostringstream out_;
};

}  // namespace

std::string printCppColumnKernel(const Kernel& kernel) { return CppColumnPrinter(kernel).print(); }

}  // namespace fuser::codegen
