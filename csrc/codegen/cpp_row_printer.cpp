// C++ row kernels. Each pass over a row is one loop under `#pragma omp simd
// reduction(...)` (compiled with -fopenmp-simd: no OpenMP runtime), which lets the
// compiler vectorize the reductions, reordering their combining as it must, and nothing
// else. A max or min reduces with a plain comparison plus an or-reduced NaN flag, as
// OpenMP's max and min do not propagate NaN.
#include <algorithm>
#include <functional>
#include <limits>
#include <sstream>

#include "codegen/common_prelude.h"
#include "codegen/cpp_prelude.h"
#include "codegen/cpp_trig_prelude.h"
#include "codegen/cpp_vector_math.h"
#include "codegen/expr_analysis.h"
#include "codegen/expr_printer.h"
#include "codegen/philox.h"
#include "codegen/row_printer.h"
#include "codegen/row_schedule.h"
#include "codegen/split_rows.h"

namespace fuser::codegen {
namespace {

// Rows up to kHeldCapacity elements keep their values in local buffers, of at most
// kMaxHeldBytes in all (within the L1 and L2 caches of a core); rows up to
// kHeapHeldCapacity (a vocabulary's logits) in buffers each thread keeps per kernel
// (FxThreadBuffer), 1 MB per float value at most (a softmax over 4 rows of 262144
// computed exp twice per element streaming, 1.5x eager's time on 2 cores).
constexpr int64_t kHeldCapacity = 4096;
constexpr int64_t kMaxHeldBytes = 128 * 1024;
constexpr int64_t kHeapHeldCapacity = int64_t{1} << 18;
// The most stack the float16 runs' rows of floats may take (chooseHalfRuns): 16 rows.
constexpr int64_t kMaxRunBytes = 256 * 1024;
// Elements a float sum adds in float before its double accumulator takes the block's sum.
constexpr int64_t kSumBlock = 256;
// Values costing this much (expr_analysis.h's units: an exp is 16) are kept, not redone.
constexpr int kKeepCost = 16;


class CppRowPrinter {
 public:
  explicit CppRowPrinter(const Kernel& k) : k_(k), s_(scheduleRows(k)) {
    TORCH_CHECK(!k.one_pass_variance, "fuser: one-pass variances are printed for CUDA only");
  }

  std::string print() {
    out_ << kCppPrelude << kCppVectorMath << trigPreludeFor(k_) << kCommonPrelude
         << (drawsRandomNumbers(k_) ? kPhiloxPrelude : "")
         << kRowHelpers << "\nextern \"C\" void " << k_.name
         << "(void* const* fx_ptrs, const int64_t* fx_sizes, const int64_t* fx_strides,\n"
         << "    const double* fx_dargs, const int64_t* fx_iargs, int32_t* fx_error,\n"
         << "    int64_t fx_begin, int64_t fx_end) {\n";
    printPointers();
    printExprs(s_.constants, "  ", "0");
    if (k_.row_stage >= 0) {
      printStage();
      out_ << "}\n";
      return out_.str();
    }
    const std::vector<bool> kept = keptValues();
    const std::vector<int> holders = heldInOutputs(kept);
    const bool held = printsHeldRow(kept);
    if (held) printHeldBuffers(kept, holders);
    const bool runs = held && chooseHalfRuns();
    if (runs) printHalfRunBuffers();
    out_ << "  for (int64_t fx_r = fx_begin; fx_r < fx_end; ++fx_r) {\n";
    printRowOffsets(out_, k_, "    ");
    printExprs(s_.row_start, "    ", "0");
    if (runs) {
      out_ << "    if (fx_n <= " << kHeldCapacity << " && fx_heap_ok) {\n";
      for (size_t i = 0; i < k_.inputs.size(); ++i) {
        if (!half_in_[i]) continue;
        // (A row the last one converted, a LayerNorm's weight, is not converted again.)
        const std::string n = std::to_string(i);
        out_ << "    if (off" << n << " != fx_hin_at" << n << ") fx_h2f_run(in" << n
             << " + off" << n << ", fx_hin" << n << ", fx_n);\n    fx_hin_at" << n << " = off"
             << n << ";\n";
      }
      half_runs_ = true;
      printHeldRow(kept);
      half_runs_ = false;
      out_ << "    continue;\n    }\n";
    }
    // (With runs, the held row below serves only rows past kHeldCapacity.)
    if (held && !(runs && heldCapacity(kept, holders) <= kHeldCapacity)) {
      out_ << "    if (fx_n <= " << heldCapacity(kept, holders) << " && fx_heap_ok) {\n";
      for (size_t i = 0; i < holders.size(); ++i) {
        if (holders[i] < 0) continue;
        out_ << "    if (fx_n > " << kHeldCapacity << ") fx_held" << i << " = out" << holders[i]
             << " + " << outputRowStart(k_, static_cast<size_t>(holders[i])) << ";\n";
      }
      printHeldRow(kept);
      out_ << "    continue;\n    }\n";
    }
    printStreamingRow();
    out_ << "  }\n}\n";
    return out_.str();
  }

 private:
  void printPointers() {
    printRowPointers(out_, k_, "fx_ptrs", "fx_strides");
    out_ << "  (void)fx_dargs; (void)fx_iargs; (void)fx_error;\n";
  }

  // A stage of rows cut in slices (split_rows.h): the range counts units, each one
  // slice of one row, walked as a streaming row is.
  void printStage() {
    const int passes = static_cast<int>(s_.passes.size());
    printSplitBufferPointers(out_, k_, s_, "fx_ptrs");
    out_ << "  for (int64_t fx_u = fx_begin; fx_u < fx_end; ++fx_u) {\n";
    printSplitUnit(out_, k_, s_, "    ");
    printRowOffsets(out_, k_, "    ");
    printExprs(s_.row_start, "    ", "0");
    printFinishedPasses(out_, k_, s_, "    ", "fx_s == 0");
    if (k_.row_stage < passes) {
      const RowSchedule::Pass& pass = s_.passes[k_.row_stage];
      printReducingLoop(pass.reduces, [&](const std::string& indent) {
        printExprs(pass.element, indent, "fx_e");
      }, vectorSumValues(pass.reduces));
      // The slice's sums as accumulated (a float sum's double), the others as reduced.
      printPartialStores(out_, k_, s_, "    ", "true", [&](ExprId r) {
        const auto kind = static_cast<ReduceKind>(k_.exprs[r].index);
        return (kind == ReduceKind::Sum ? "fx_acc" : "v") + std::to_string(r);
      });
      out_ << "  }\n";
      return;
    }
    out_ << "    if (fx_s == 0) {\n";
    printPerRowStores(out_, k_, "      ");
    out_ << "    }\n";
    openElementLoop("GCC ivdep");
    printExprs(s_.final_element, "      ", "fx_e");
    printElementStores(out_, k_, "      ", nested_);
    closeElementLoop();
    out_ << "  }\n";
  }

  // Float sums accumulate in double: a float accumulator would lose
  // more than eager's cascade sum does (a float32 row of 1517 summed 4e-5 away from it).
  // Softmax's sum of exponentials stays in float, as eager's vectorized CPU kernel sums
  // it: in double the pass ran at half the vector width (softmax over 8192 x 256 took
  // 1480 us on one core, 1231 in float).
  static const char* accumulatorType(const Expr& e) {
    return sumsInDouble(e) ? "double" : computeTypeName(e.type);
  }

  // One loop over the row's elements computing `body` (the work for element fx_e) and
  // the pass's reductions of it. Float sums kept in double are summed in float within
  // blocks of kSumBlock elements, each block's sum then added in double: the loop keeps
  // float's vector width, and a block's float sum loses no more than eager's cascade
  // sum does (layer_norm over 2048 x 1024 on one core: 725 us summing in double, 556
  // in blocks; eager 564).
  // `vector_values`: the element values of the pass's sums where they are printed as
  // explicit vectors too (vectorSumValues), else empty.
  void printReducingLoop(const std::vector<ExprId>& reduces,
                         const std::function<void(const std::string&)>& body,
                         const std::vector<ExprId>& vector_values = {}) {
    const bool blocked = std::any_of(reduces.begin(), reduces.end(),
                                     [&](ExprId r) { return sumsInDouble(k_.exprs[r]); });
    auto sumVariable = [&](const Expr& e, const std::string& n) {
      return (blocked && sumsInDouble(e) ? "fx_part" : "fx_acc") + n;
    };
    std::string clauses;
    for (ExprId r : reduces) {
      const Expr& e = k_.exprs[r];
      const std::string n = std::to_string(r);
      const auto kind = static_cast<ReduceKind>(e.index);
      out_ << "    " << accumulatorType(e) << " fx_acc" << n << " = " << reduceIdentity(e) << ";\n";
      if (kind == ReduceKind::Sum) {
        clauses += " reduction(+:" + sumVariable(e, n) + ")";
      } else {
        out_ << "    int fx_nan" << n << " = 0;\n";
        clauses += std::string(" reduction(") + (kind == ReduceKind::Max ? "max" : "min") +
                   ":fx_acc" + n + ") reduction(|:fx_nan" + n + ")";
      }
    }
    if (blocked) {
      // Nested rows block their inner dim (fx_i1), each run of it within one fx_i0.
      const std::string d1 = "fx_sizes[" + std::to_string(k_.outer_ndim + 1) + "]";
      const std::string end = nested_ ? inner_hi_ : hi_;
      const std::string index = nested_ ? "fx_i1" : "fx_e";
      if (nested_) openOuterLoop();
      out_ << "    for (int64_t fx_blk = " << (nested_ ? inner_lo_ : lo_) << "; fx_blk < " << end
           << "; fx_blk += " << kSumBlock
           << ") {\n"
           << "    const int64_t fx_blk_end = fx_blk + " << kSumBlock << " < " << end
           << " ? fx_blk + " << kSumBlock << " : " << end << ";\n";
      for (ExprId r : reduces) {
        if (!sumsInDouble(k_.exprs[r])) continue;
        out_ << "    float fx_part" << r << " = 0.0f;\n";
      }
      // The block's vectors first, where printed; then a plain loop takes what is left
      // (rows shorter than a vector).
      if (vector_values.empty()) {
        out_ << "#pragma omp simd" << clauses << "\n    for (int64_t " << index << " = fx_blk; ";
      } else {
        printVectorSums(reduces, vector_values);
        out_ << "    for (int64_t " << index << " = fx_tail; ";
      }
      out_ << index << " < fx_blk_end; ++" << index << ") {\n";
      if (nested_) out_ << "      const int64_t fx_e = fx_i0 * " << d1 << " + fx_i1;\n";
    } else {
      openElementLoop("omp simd" + clauses);
    }
    body("      ");
    for (ExprId r : reduces) {
      const Expr& e = k_.exprs[r];
      const std::string n = std::to_string(r);
      const std::string v = "v" + std::to_string(e.args[0]);
      switch (static_cast<ReduceKind>(e.index)) {
        case ReduceKind::Sum:
          if (blocked && sumsInDouble(e)) {
            out_ << "      fx_part" << n << " += " << v << ";\n";
          } else {
            out_ << "      fx_acc" << n << " += (" << accumulatorType(e) << ")" << v << ";\n";
          }
          break;
        case ReduceKind::Max:
          out_ << "      fx_acc" << n << " = fx_acc" << n << " > " << v << " ? fx_acc" << n
               << " : " << v << ";\n      fx_nan" << n << " |= " << v << " != " << v << ";\n";
          break;
        case ReduceKind::Min:
          out_ << "      fx_acc" << n << " = fx_acc" << n << " < " << v << " ? fx_acc" << n
               << " : " << v << ";\n      fx_nan" << n << " |= " << v << " != " << v << ";\n";
          break;
        case ReduceKind::SquaredDeviations:  // CUDA only: the constructor refuses the kernel
        case ReduceKind::WelfordMean:
          break;
      }
    }
    if (blocked) {
      out_ << "    }\n";
      for (ExprId r : reduces) {
        if (sumsInDouble(k_.exprs[r])) out_ << "    fx_acc" << r << " += fx_part" << r << ";\n";
      }
      out_ << (nested_ ? "    }\n    }\n" : "    }\n");
    } else {
      closeElementLoop();
    }
    for (ExprId r : reduces) {
      const Expr& e = k_.exprs[r];
      const std::string n = std::to_string(r);
      const char* t = computeTypeName(e.type);
      const bool f32 = e.type == c10::ScalarType::Float;
      out_ << "    const " << t << " v" << n << " = ";
      if (static_cast<ReduceKind>(e.index) == ReduceKind::Sum) {
        out_ << "(" << t << ")fx_acc" << n << ";\n";
      } else {
        out_ << "fx_nan" << n << " ? " << (f32 ? "FX_NANF" : "FX_NAN") << " : fx_acc" << n
             << ";\n";
      }
    }
  }

  // Sums of float values kept in double whose values come from loads of float or
  // bfloat16 rows of unit stride and + - * / and negation (with values of the row and
  // constants): their element values, in order, which printVectorSums prints as
  // explicit vectors; empty where a pass has other reductions or values. GCC's `omp simd`
  // sum keeps one vector accumulator, a chain of dependent adds whose latency short rows
  // pay in full: 2688 rows of 196 floats took 38 us so, 29 in four accumulators
  // (AVX-512, one core); LayerNorm over 2048 bfloat16 rows of 1024, 1046 us so, 877 so.
  std::vector<ExprId> vectorSumValues(const std::vector<ExprId>& reduces) const {
    if (nested_ || reduces.empty()) return {};
    std::vector<bool> need(k_.exprs.size(), false);
    for (ExprId r : reduces) {
      const Expr& e = k_.exprs[r];
      // (A sum of a value of the row, the same in every element, keeps the loop.)
      if (static_cast<ReduceKind>(e.index) != ReduceKind::Sum || !sumsInDouble(e) ||
          e.type != c10::ScalarType::Float || !s_.element[e.args[0]]) {
        return {};
      }
      need[e.args[0]] = true;
    }
    std::vector<ExprId> values;
    for (size_t i = k_.exprs.size(); i-- > 0;) {
      if (!need[i] || !s_.element[i]) continue;
      const Expr& e = k_.exprs[i];
      if (e.type != c10::ScalarType::Float) return {};
      switch (e.op) {
        case IrOp::Load: {
          const TensorInput& in = k_.inputs[e.index];
          const bool loads16 = in.dtype == c10::ScalarType::Float ||
                               in.dtype == c10::ScalarType::BFloat16 ||
                               (half_runs_ && half_in_[e.index]);
          if (!loads16 || !in.inner_unit_stride) return {};
          break;
        }
        case IrOp::Add:
        case IrOp::Sub:
        case IrOp::Mul:
        case IrOp::Div:
        case IrOp::Neg: break;
        default: return {};
      }
      for (ExprId a : e.args) need[a] = true;
      values.push_back(static_cast<ExprId>(i));
    }
    std::reverse(values.begin(), values.end());
    return values;
  }

  // The block's vectors of 16 elements, from fx_tail (its start) on, four to a step,
  // each of the four summed in its own accumulator; then the last 16 elements of the
  // row up to the block's end, their lanes before fx_tail left out (GCC's vector loop
  // over a dozen elements cost more than the row's sum). fx_tail ends at the first
  // element left (only in rows shorter than a vector), and each sum's fx_part holds the
  // vectors' sum.
  void printVectorSums(const std::vector<ExprId>& reduces, const std::vector<ExprId>& values) {
    out_ << "    int64_t fx_tail = fx_blk;\n    {\n";
    for (ExprId r : reduces) {
      out_ << "    fx_f32x16 fx_w" << r << "_0 = {}, fx_w" << r << "_1 = {}, fx_w" << r
           << "_2 = {}, fx_w" << r << "_3 = {};\n";
    }
    auto step = [&](const std::string& start, int accumulator, bool masked = false) {
      out_ << "      {\n      const int64_t fx_ev = " << start << ";\n";
      for (ExprId i : values) {
        const Expr& e = k_.exprs[i];
        const std::string a = e.args.empty() ? "" : "v" + std::to_string(e.args[0]);
        const std::string b = e.args.size() < 2 ? "" : "v" + std::to_string(e.args[1]);
        out_ << "      const auto v" << i << " = ";
        switch (e.op) {
          case IrOp::Load:
            if (half_runs_ && half_in_[e.index]) {
              out_ << "fx_load16(fx_hin" << e.index << " + fx_ev)";
            } else {
              out_ << (k_.inputs[e.index].dtype == c10::ScalarType::BFloat16 ? "fx_load16_bf(in"
                                                                            : "fx_load16(in")
                   << e.index << " + off" << e.index << " + fx_ev)";
            }
            break;
          case IrOp::Add: out_ << a << " + " << b; break;
          case IrOp::Sub: out_ << a << " - " << b; break;
          case IrOp::Mul: out_ << a << " * " << b; break;
          case IrOp::Div: out_ << a << " / " << b; break;
          default: out_ << "-" << a; break;  // Neg (vectorSumValues admits no other)
        }
        out_ << ";\n";
      }
      for (ExprId r : reduces) {
        const std::string v = "v" + std::to_string(k_.exprs[r].args[0]);
        out_ << "      fx_w" << r << "_" << accumulator << " += "
             << (masked ? "fx_lanes_from(" + v + ", (int)(fx_tail - fx_ev))" : v) << ";\n";
      }
      out_ << "      }\n";
    };
    out_ << "    for (; fx_tail + 64 <= fx_blk_end; fx_tail += 64) {\n";
    for (int a = 0; a < 4; ++a) step("fx_tail + " + std::to_string(16 * a), a);
    out_ << "    }\n    for (; fx_tail + 16 <= fx_blk_end; fx_tail += 16) {\n";
    step("fx_tail", 0);
    out_ << "    }\n    if (fx_tail < fx_blk_end && fx_blk_end >= 16) {\n";
    step("fx_blk_end - 16", 1, /*masked=*/true);
    out_ << "    fx_tail = fx_blk_end;\n    }\n";
    for (ExprId r : reduces) {
      const std::string w = "fx_w" + std::to_string(r);
      out_ << "    fx_part" << r << " = fx_sum16((" << w << "_0 + " << w << "_1) + (" << w << "_2 + "
           << w << "_3));\n";
    }
    out_ << "    }\n";
  }

  // Each pass loads again what it needs and recomputes it.
  void printStreamingRow() {
    for (const RowSchedule::Pass& pass : s_.passes) {
      printReducingLoop(pass.reduces, [&](const std::string& indent) {
        printExprs(pass.element, indent, "fx_e");
      }, vectorSumValues(pass.reduces));
      printExprs(pass.after, "    ", "0");
    }
    printRowStores();
    openElementLoop("GCC ivdep");
    printExprs(s_.final_element, "      ", "fx_e");
    printElementStores(out_, k_, "      ", nested_);
    closeElementLoop();
  }

  // The loop over a row's elements fx_e, under `pragma`. A row of two inner dims that
  // cannot merge (group_norm's channels, read per channel, and the dims after them) is
  // two nested loops, so that no load divides fx_e by a size.
  void openElementLoop(const std::string& pragma) {
    if (!nested_) {
      out_ << "#pragma " << pragma << "\n    for (int64_t fx_e = " << lo_ << "; fx_e < " << hi_
           << "; ++fx_e) {\n";
      return;
    }
    const std::string d1 = std::to_string(k_.outer_ndim + 1);
    openOuterLoop();
    out_ << "#pragma " << pragma << "\n    for (int64_t fx_i1 = " << inner_lo_ << "; fx_i1 < "
         << inner_hi_ << "; ++fx_i1) {\n      const int64_t fx_e = fx_i0 * fx_sizes[" << d1
         << "] + fx_i1;\n";
  }

  // The first of a nested row's loops: over its first dim (a stage: the part its slice
  // covers, fx_i1 then ranging over [fx_i1_lo, fx_i1_hi) in each).
  void openOuterLoop() {
    const std::string d0 = "fx_sizes[" + std::to_string(k_.outer_ndim) + "]";
    const std::string d1 = "fx_sizes[" + std::to_string(k_.outer_ndim + 1) + "]";
    if (k_.row_stage < 0) {
      out_ << "    for (int64_t fx_i0 = 0; fx_i0 < " << d0 << "; ++fx_i0) {\n";
      printNestedRowBases(out_, k_, "    ");
      return;
    }
    out_ << "    for (int64_t fx_i0 = fx_lo / " << d1 << "; fx_i0 < " << d0 << " && fx_i0 * " << d1
         << " < fx_hi; ++fx_i0) {\n"
         << "    const int64_t fx_i1_lo = fx_i0 * " << d1 << " < fx_lo ? fx_lo - fx_i0 * " << d1
         << " : 0;\n"
         << "    const int64_t fx_i1_hi = (fx_i0 + 1) * " << d1 << " > fx_hi ? fx_hi - fx_i0 * "
         << d1 << " : " << d1 << ";\n";
    printNestedRowBases(out_, k_, "    ");
  }

  void closeElementLoop() { out_ << (nested_ ? "    }\n    }\n" : "    }\n"); }

  // Rows of at most kHeldCapacity elements: each loop of the schedule computes its
  // element values once and keeps those a later loop reads (RowSchedule::held) in
  // fx_held<id>[element], so softmax's exp, say, runs once per element.
  bool printsHeldRow(const std::vector<bool>& kept) const {
    int64_t bytes = 0;
    for (size_t i = 0; i < kept.size(); ++i) {
      if (kept[i]) bytes += kHeldCapacity * static_cast<int64_t>(c10::elementSize(k_.exprs[i].type));
    }
    return bytes <= kMaxHeldBytes;
  }

  // Per expression, the whole output whose row holds it past kHeldCapacity (-1: none):
  // an output of the value's own type stored only by the last loop, which reads a held
  // element before storing that element, so the output's row can hold the value until
  // then (eager's softmax keeps its exp in its result the same way). One value each.
  std::vector<int> heldInOutputs(const std::vector<bool>& kept) const {
    std::vector<int> holder(kept.size(), -1);
    std::vector<bool> taken(k_.outputs.size(), false);
    const int last = static_cast<int>(s_.passes.size());
    for (size_t i = 0; i < kept.size(); ++i) {
      if (!kept[i]) continue;
      for (size_t o = 0; o < k_.outputs.size(); ++o) {
        const TensorOutput& out = k_.outputs[o];
        // (A row stored apart is no run to hold a row in.)
        if (taken[o] || out.per_row || out.rows_apart || out.dtype != k_.exprs[i].type ||
            s_.storeLoop(k_, o) != last) {
          continue;
        }
        taken[o] = true;
        holder[i] = static_cast<int>(o);
        break;
      }
    }
    return holder;
  }

  // The longest row held: any where every kept value has an output to hold it,
  // kHeapHeldCapacity where some are kept in the heap past kHeldCapacity, kHeldCapacity
  // where none is kept; longer rows stream.
  static int64_t heldCapacity(const std::vector<bool>& kept, const std::vector<int>& holders) {
    bool any = false, heap = false;
    for (size_t i = 0; i < kept.size(); ++i) {
      any = any || kept[i];
      heap = heap || (kept[i] && holders[i] < 0);
    }
    if (!any) return kHeldCapacity;
    return heap ? kHeapHeldCapacity : std::numeric_limits<int64_t>::max();
  }

  void printHeldBuffers(const std::vector<bool>& kept, const std::vector<int>& holders) {
    out_ << "  bool fx_heap_ok = true;  // false: a heap buffer was refused, rows stream\n";
    for (size_t i = 0; i < kept.size(); ++i) {
      if (!kept[i]) continue;
      const char* t = computeTypeName(k_.exprs[i].type);
      const std::string n = std::to_string(i);
      out_ << "  " << t << " fx_stack" << n << "[" << kHeldCapacity << "];\n"
           << "  " << t << "* fx_held" << n << " = fx_stack" << n << ";\n";
      if (holders[i] >= 0) continue;  // past kHeldCapacity, in its output (per row)
      out_ << "  static thread_local FxThreadBuffer<" << t << "> fx_heap" << n << ";\n"
           << "  if (fx_n > " << kHeldCapacity << " && fx_n <= " << kHeapHeldCapacity << ") {\n"
           << "    fx_held" << n << " = fx_heap" << n << ".atLeast(fx_n);\n"
           << "    fx_heap_ok = fx_heap_ok && fx_held" << n << ";\n"
           << "  }\n";
    }
  }

  // The values worth keeping: read by a later loop and costing kKeepCost or more to
  // recompute there (softmax's exp, a float16 rounding: cpuRecomputeCost); loads and
  // cheap arithmetic are done again, which moves less memory than a store and a reload.
  std::vector<bool> keptValues() const {
    const size_t n = k_.exprs.size();
    std::vector<int> cost(n, 0);
    std::vector<bool> kept(n, false);
    for (size_t i = 0; i < n; ++i) {
      const Expr& e = k_.exprs[i];
      if (!s_.element[i] || e.op == IrOp::Load || e.op == IrOp::ElementIndex) continue;
      cost[i] = cpuRecomputeCost(k_, e);
      for (ExprId a : e.args) cost[i] = std::min(kKeepCost, cost[i] + cost[a]);
      kept[i] = s_.held[i] && cost[i] >= kKeepCost;
    }
    return kept;
  }

  // Loop l's work per element fx_e: its own values, the reductions' operands and the
  // outputs it stores, each from kept values or recomputed.
  void printHeldBody(int l, const std::vector<bool>& kept, const std::string& indent) {
    const size_t n = k_.exprs.size();
    const int passes = static_cast<int>(s_.passes.size());
    std::vector<bool> need(n, false), read(n, false);
    for (size_t i = 0; i < n; ++i) {
      need[i] = s_.used[i] && s_.element[i] && s_.loop[i] == l;
    }
    if (l < passes) {
      for (ExprId r : s_.passes[l].reduces) need[k_.exprs[r].args[0]] = true;
    }
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (!k_.outputs[o].per_row && s_.storeLoop(k_, o) == l) need[k_.outputs[o].value] = true;
    }
    for (size_t i = n; i-- > 0;) {
      if (!need[i] || !s_.element[i]) {
        need[i] = false;
        continue;
      }
      if (s_.loop[i] < l && kept[i]) {
        need[i] = false;
        read[i] = true;
        continue;
      }
      for (ExprId a : k_.exprs[i].args) {
        if (s_.element[a]) need[a] = true;
      }
    }
    auto load = [&](const Expr& e) { return elementLoad(e, "fx_e"); };
    for (size_t i = 0; i < n; ++i) {
      const char* t = computeTypeName(k_.exprs[i].type);
      if (read[i]) {
        out_ << indent << "const " << t << " v" << i << " = fx_held" << i << "[fx_e];\n";
      } else if (need[i]) {
        out_ << indent << "const " << t << " v" << i << " = " << formatExpr(k_, k_.exprs[i], load)
             << ";\n";
        if (kept[i] && s_.loop[i] == l) out_ << indent << "fx_held" << i << "[fx_e] = v" << i << ";\n";
      }
    }
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      const TensorOutput& out = k_.outputs[o];
      if (out.per_row || s_.storeLoop(k_, o) != l) continue;
      out_ << indent << heldStore(o) << ";\n";
    }
  }

  // ---- float16 rows converted as runs -------------------------------------------------
  // In rows of at most kHeldCapacity elements, each float16 input read along the row
  // (unit stride) is converted once per row into fx_hin<i> (fx_h2f_run: F16C, 8 elements
  // an instruction) and its loads read floats; each float16 output is stored as floats in
  // fx_hout<o> and converted after the loop that computes it (fx_f2h_run). LayerNorm over
  // 2048 float16 rows of 1024, one core: 1854 -> 688 us (TorchScript 744); its input was
  // converted element by element in each of its three loops.
  bool chooseHalfRuns() {
    if (nested_ || k_.row_stage >= 0) return false;
    half_in_.assign(k_.inputs.size(), false);
    half_out_.assign(k_.outputs.size(), false);
    bool any = false;
    for (size_t i = 0; i < k_.exprs.size(); ++i) {
      const Expr& e = k_.exprs[i];
      if (e.op != IrOp::Load || !s_.element[i]) continue;
      const TensorInput& in = k_.inputs[e.index];
      if (in.dtype == c10::ScalarType::Half && in.inner_unit_stride) {
        half_in_[e.index] = true;
        any = true;
      }
    }
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      const TensorOutput& out = k_.outputs[o];
      if (out.dtype == c10::ScalarType::Half && !out.per_row && !out.rows_apart &&
          !out.column_partial) {
        half_out_[o] = true;
        any = true;
      }
    }
    // Each run takes a row of floats on the stack: a kernel of many float16 tensors
    // converts element by element rather than pass kMaxRunBytes.
    const auto runs = std::count(half_in_.begin(), half_in_.end(), true) +
                      std::count(half_out_.begin(), half_out_.end(), true);
    return any && runs * kHeldCapacity * static_cast<int64_t>(sizeof(float)) <= kMaxRunBytes;
  }

  void printHalfRunBuffers() {
    for (size_t i = 0; i < half_in_.size(); ++i) {
      if (!half_in_[i]) continue;
      out_ << "  float fx_hin" << i << "[" << kHeldCapacity << "];\n"
           << "  int64_t fx_hin_at" << i << " = -1;  // the row offset converted\n";
    }
    for (size_t o = 0; o < half_out_.size(); ++o) {
      if (half_out_[o]) out_ << "  float fx_hout" << o << "[" << kHeldCapacity << "];\n";
    }
  }

  // After loop l of a row converted as runs: the float16 outputs it stored.
  void printHalfRunStores(int l) {
    if (!half_runs_) return;
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (!half_out_[o] || s_.storeLoop(k_, o) != l) continue;
      out_ << "    fx_f2h_run(fx_hout" << o << ", out" << o << " + " << outputRowStart(k_, o)
           << ", fx_n);\n";
    }
  }

  // Where a row converted as runs stores output o's element fx_e.
  std::string heldStore(size_t o) const {
    const TensorOutput& out = k_.outputs[o];
    const std::string v = "v" + std::to_string(out.value);
    if (half_runs_ && half_out_[o]) {
      return "fx_hout" + std::to_string(o) + "[fx_e] = " +
             storeConversion(c10::ScalarType::Float, v);
    }
    return outputElement(k_, o, "fx_e", nested_) + " = " + storeConversion(out.dtype, v);
  }

  void printHeldRow(const std::vector<bool>& kept) {
    const int passes = static_cast<int>(s_.passes.size());
    // A loop that keeps no value and stores no output computes only its sums' values,
    // which can be vectors.
    const bool keeps = std::find(kept.begin(), kept.end(), true) != kept.end();
    for (int l = 0; l < passes; ++l) {
      bool stores = false;
      for (size_t o = 0; o < k_.outputs.size(); ++o) {
        stores = stores || (!k_.outputs[o].per_row && s_.storeLoop(k_, o) == l);
      }
      printReducingLoop(s_.passes[l].reduces, [&](const std::string& indent) {
        printHeldBody(l, kept, indent);
      }, keeps || stores ? std::vector<ExprId>{} : vectorSumValues(s_.passes[l].reduces));
      printHalfRunStores(l);
      printExprs(s_.passes[l].after, "    ", "0");
    }
    printRowStores();
    openElementLoop("GCC ivdep");
    printHeldBody(passes, kept, "      ");
    closeElementLoop();
    printHalfRunStores(passes);
  }

  void printRowStores() { printPerRowStores(out_, k_, "    "); }

  // `element` names the row's element index the loads read (row-level loads ignore it).
  void printExprs(const std::vector<ExprId>& ids, const std::string& indent,
                  const std::string& element) {
    printRowExprs(out_, k_, ids, indent, [&](const Expr& e) { return elementLoad(e, element); });
  }

  std::string elementLoad(const Expr& load, const std::string& element) const {
    if (half_runs_ && load.op == IrOp::Load && half_in_[load.index] && element == "fx_e") {
      return loadConversion(c10::ScalarType::Float, load.type,
                            "fx_hin" + std::to_string(load.index) + "[fx_e]");
    }
    return nested_ && element == "fx_e" ? rowLoadNested(k_, load) : rowLoad(k_, load, element);
  }

  const Kernel& k_;
  // Stages walk a slice of the row: [fx_lo, fx_hi), or its part of each inner run.
  const bool nested_ = k_.inner_ndim == 2;
  const std::string lo_ = k_.row_stage < 0 ? "0" : "fx_lo";
  const std::string hi_ = k_.row_stage < 0 ? "fx_n" : "fx_hi";
  const std::string inner_lo_ = k_.row_stage < 0 ? "0" : "fx_i1_lo";
  const std::string inner_hi_ =
      k_.row_stage < 0 ? "fx_sizes[" + std::to_string(k_.outer_ndim + 1) + "]" : "fx_i1_hi";
  RowSchedule s_;
  // float16 runs (chooseHalfRuns): the inputs and outputs converted as runs, and whether
  // the row being printed reads and stores them so.
  std::vector<bool> half_in_, half_out_;
  bool half_runs_ = false;
  std::ostringstream out_;
};

}  // namespace

std::string printCppRowKernel(const Kernel& kernel) {
  return kernel.columns ? printColumnKernel(kernel, /*cuda=*/false) : CppRowPrinter(kernel).print();
}

}  // namespace fuser::codegen
