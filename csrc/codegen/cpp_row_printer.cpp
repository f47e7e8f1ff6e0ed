// C++ row kernels. Each pass's reductions keep kLanes partial results in a vector,
// element e of the row going to partial e % kLanes, so that the pass runs in vector
// registers (the compiler may not reorder one float sum itself); the partials are
// combined after the pass.
#include <algorithm>
#include <functional>
#include <sstream>

#include "codegen/common_prelude.h"
#include "codegen/cpp_prelude.h"
#include "codegen/expr_analysis.h"
#include "codegen/expr_printer.h"
#include "codegen/row_printer.h"
#include "codegen/row_schedule.h"

namespace fuser::codegen {
namespace {

constexpr int kLanes = 8;
// Rows up to kHeldCapacity elements keep their values in local buffers, of at most
// kMaxHeldBytes in all (within the L1 and L2 caches of a core).
constexpr int64_t kHeldCapacity = 4096;
constexpr int64_t kMaxHeldBytes = 128 * 1024;
// Values costing this much (expr_analysis.h's units: an exp is 16) are kept, not redone.
constexpr int kKeepCost = 16;

const char* kCppRowHelpers = R"FUSER(
typedef float fx_v8float __attribute__((vector_size(32)));
typedef double fx_v8double __attribute__((vector_size(64)));
FX_INLINE fx_v8float fx_vload(const float* p) {
  fx_v8float v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}
FX_INLINE fx_v8double fx_vload(const double* p) {
  fx_v8double v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}
)FUSER";

class CppRowPrinter {
 public:
  explicit CppRowPrinter(const Kernel& k) : k_(k), s_(scheduleRows(k)) {}

  std::string print() {
    out_ << kCppPrelude << kCommonPrelude << kRowHelpers << kCppRowHelpers << "\nextern \"C\" void " << k_.name
         << "(void* const* fx_ptrs, const int64_t* fx_sizes, const int64_t* fx_strides,\n"
         << "    const double* fx_dargs, const int64_t* fx_iargs, int32_t* fx_error,\n"
         << "    int64_t fx_begin, int64_t fx_end) {\n";
    printPointers();
    printExprs(s_.constants, "  ", "0");
    const std::vector<bool> kept = keptValues();
    const bool held = printsHeldRow(kept);
    if (held) printHeldBuffers(kept);
    out_ << "  for (int64_t fx_r = fx_begin; fx_r < fx_end; ++fx_r) {\n";
    printRowOffsets();
    printExprs(s_.row_start, "    ", "0");
    if (held) {
      out_ << "    if (fx_n <= " << kHeldCapacity << ") {\n";
      printHeldRow(kept);
      out_ << "    continue;\n    }\n";
    }
    printStreamingRow();
    out_ << "  }\n}\n";
    return out_.str();
  }

 private:
  void printPointers() {
    const int nd = k_.outer_ndim + k_.inner_ndim;
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      const char* t = storageTypeName(k_.inputs[i].dtype);
      out_ << "  const " << t << "* __restrict__ in" << i << " = (const " << t << "*)fx_ptrs["
           << i << "];\n  const int64_t* st" << i << " = fx_strides + " << i * nd << ";\n"
           << "  (void)st" << i << ";\n";
    }
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      const char* t = storageTypeName(k_.outputs[o].dtype);
      out_ << "  " << t << "* __restrict__ out" << o << " = (" << t << "*)fx_ptrs["
           << k_.inputs.size() + o << "];\n";
    }
    out_ << "  (void)fx_dargs; (void)fx_iargs; (void)fx_error;\n  int64_t fx_n = 1;\n";
    for (int d = 0; d < k_.inner_ndim; ++d) {
      out_ << "  fx_n *= fx_sizes[" << k_.outer_ndim + d << "];\n";
    }
  }

  void printRowOffsets() {
    for (size_t i = 0; i < k_.inputs.size(); ++i) out_ << "    int64_t off" << i << " = 0;\n";
    out_ << "    {\n      int64_t fx_q = fx_r;\n";
    for (int d = k_.outer_ndim - 1; d >= 0; --d) {
      out_ << "      { const int64_t fx_idx = fx_q % fx_sizes[" << d << "]; fx_q /= fx_sizes["
           << d << "];";
      for (size_t i = 0; i < k_.inputs.size(); ++i) {
        out_ << " off" << i << " += fx_idx * st" << i << "[" << d << "];";
      }
      out_ << " }\n";
    }
    out_ << "    }\n";
  }

  // Float sums accumulate in double: n / kLanes additions in a row would otherwise lose
  // more than eager's cascade sum does (a float32 row of 1517 summed 4e-5 away from it).
  static const char* accumulatorType(const Expr& e) {
    const bool float_sum = e.type == c10::ScalarType::Float &&
                           static_cast<ReduceKind>(e.index) == ReduceKind::Sum;
    return float_sum ? "double" : computeTypeName(e.type);
  }

  static std::string vectorType(const Expr& e) {
    return std::string("fx_v") + std::to_string(kLanes) + accumulatorType(e);
  }

  // Blocks of kLanes elements: the elements' values go to a small array (an elementwise
  // loop the compiler vectorizes), which is combined into a vector accumulator; the
  // last elements into a scalar one. `body` prints the work for element fx_e.
  void printReducingLoop(const std::vector<ExprId>& reduces,
                         const std::function<void(const std::string&)>& body) {
    for (ExprId r : reduces) {
      const Expr& e = k_.exprs[r];
      out_ << "    " << vectorType(e) << " fx_vacc" << r << " = " << vectorType(e) << "{} + ("
           << accumulatorType(e) << ")" << reduceIdentity(e) << ";\n"
           << "    " << accumulatorType(e) << " fx_acc" << r << " = " << reduceIdentity(e) << ";\n";
    }
    out_ << "    {\n    int64_t fx_j = 0;\n"
         << "    for (; fx_j + " << kLanes << " <= fx_n; fx_j += " << kLanes << ") {\n";
    for (ExprId r : reduces) {
      out_ << "      " << computeTypeName(k_.exprs[r].type) << " fx_t" << r << "[" << kLanes
           << "];\n";
    }
    out_ << "      for (int fx_u = 0; fx_u < " << kLanes << "; ++fx_u) {\n"
         << "        const int64_t fx_e = fx_j + fx_u;\n";
    body("        ");
    for (ExprId r : reduces) {
      out_ << "        fx_t" << r << "[fx_u] = v" << k_.exprs[r].args[0] << ";\n";
    }
    out_ << "      }\n";
    for (ExprId r : reduces) {
      const Expr& e = k_.exprs[r];
      std::string block = "fx_vload(fx_t" + std::to_string(r) + ")";
      if (std::string(accumulatorType(e)) != computeTypeName(e.type)) {
        block = "__builtin_convertvector(" + block + ", " + vectorType(e) + ")";
      }
      out_ << "      fx_vacc" << r << " = " << reduceCombiner(e) << "<" << vectorType(e)
           << ">(fx_vacc" << r << ", " << block << ");\n";
    }
    out_ << "    }\n"
         << "    for (; fx_j < fx_n; ++fx_j) {\n      const int64_t fx_e = fx_j;\n";
    body("      ");
    for (ExprId r : reduces) {
      const Expr& e = k_.exprs[r];
      const char* acc = accumulatorType(e);
      out_ << "      fx_acc" << r << " = " << reduceCombiner(e) << "<" << acc << ">(fx_acc" << r
           << ", (" << acc << ")v" << e.args[0] << ");\n";
    }
    out_ << "    }\n    }\n";
    for (ExprId r : reduces) {
      const Expr& e = k_.exprs[r];
      const char* acc = accumulatorType(e);
      out_ << "    for (int fx_u = 0; fx_u < " << kLanes << "; ++fx_u) fx_acc" << r << " = "
           << reduceCombiner(e) << "<" << acc << ">(fx_acc" << r << ", fx_vacc" << r
           << "[fx_u]);\n"
           << "    const " << computeTypeName(e.type) << " v" << r << " = ("
           << computeTypeName(e.type) << ")fx_acc" << r << ";\n";
    }
  }

  // Reductions of the values in fx_red<id>: whole vectors loaded from the buffer (scalar
  // stores read back as a vector would stall store forwarding) into four accumulators
  // (one would wait on its own latency: a NaN-propagating max takes three dependent
  // instructions), the rest one by one.
  void printBufferReduction(const std::vector<ExprId>& reduces) {
    for (ExprId r : reduces) {
      const Expr& e = k_.exprs[r];
      const char* acc = accumulatorType(e);
      const std::string vt = vectorType(e);
      const std::string name = std::to_string(r);
      const std::string combine = reduceCombiner(e);
      auto block = [&](const std::string& at) {
        std::string b = "fx_vload(fx_red" + name + " + " + at + ")";
        if (std::string(acc) != computeTypeName(e.type)) {
          b = "__builtin_convertvector(" + b + ", " + vt + ")";
        }
        return b;
      };
      out_ << "    " << vt << " fx_vacc" << r << "[4];\n"
           << "    for (int fx_a = 0; fx_a < 4; ++fx_a) fx_vacc" << r << "[fx_a] = " << vt
           << "{} + (" << acc << ")" << reduceIdentity(e) << ";\n"
           << "    " << acc << " fx_acc" << r << " = " << reduceIdentity(e) << ";\n"
           << "    {\n    int64_t fx_j = 0;\n"
           << "    for (; fx_j + " << 4 * kLanes << " <= fx_n; fx_j += " << 4 * kLanes << ")\n"
           << "      for (int fx_a = 0; fx_a < 4; ++fx_a) fx_vacc" << r << "[fx_a] = " << combine
           << "<" << vt << ">(fx_vacc" << r << "[fx_a], " << block("fx_j + fx_a * " + std::to_string(kLanes))
           << ");\n"
           << "    for (; fx_j + " << kLanes << " <= fx_n; fx_j += " << kLanes << ") fx_vacc" << r
           << "[0] = " << combine << "<" << vt << ">(fx_vacc" << r << "[0], " << block("fx_j")
           << ");\n"
           << "    for (; fx_j < fx_n; ++fx_j) fx_acc" << r << " = " << combine << "<" << acc
           << ">(fx_acc" << r << ", (" << acc << ")fx_red" << r << "[fx_j]);\n"
           << "    }\n"
           << "    for (int fx_a = 0; fx_a < 4; ++fx_a)\n"
           << "      for (int fx_u = 0; fx_u < " << kLanes << "; ++fx_u) fx_acc" << r << " = "
           << combine << "<" << acc << ">(fx_acc" << r << ", fx_vacc" << r << "[fx_a][fx_u]);\n"
           << "    const " << computeTypeName(e.type) << " v" << r << " = ("
           << computeTypeName(e.type) << ")fx_acc" << r << ";\n";
    }
  }

  // Each pass loads again what it needs and recomputes it.
  void printStreamingRow() {
    for (const RowSchedule::Pass& pass : s_.passes) {
      printReducingLoop(pass.reduces, [&](const std::string& indent) {
        printExprs(pass.element, indent, "fx_e");
      });
      printExprs(pass.after, "    ", "0");
    }
    printRowStores();
    out_ << "#pragma GCC ivdep\n    for (int64_t fx_e = 0; fx_e < fx_n; ++fx_e) {\n";
    printExprs(s_.final_element, "      ", "fx_e");
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      const TensorOutput& out = k_.outputs[o];
      if (out.per_row) continue;
      out_ << "      out" << o << "[fx_r * fx_n + fx_e] = "
           << storeConversion(out.dtype, "v" + std::to_string(out.value)) << ";\n";
    }
    out_ << "    }\n";
  }

  // Rows of at most kHeldCapacity elements: each loop of the schedule computes its
  // element values once and keeps those a later loop reads (RowSchedule::held) in
  // fx_held<id>[element], so softmax's exp, say, runs once per element.
  bool printsHeldRow(const std::vector<bool>& kept) const {
    int64_t bytes = 0;
    for (size_t i = 0; i < kept.size(); ++i) {
      if (kept[i] || k_.exprs[i].op == IrOp::Reduce) {
        bytes += kHeldCapacity * static_cast<int64_t>(c10::elementSize(k_.exprs[i].type));
      }
    }
    return bytes <= kMaxHeldBytes;
  }

  void printHeldBuffers(const std::vector<bool>& kept) {
    for (size_t i = 0; i < kept.size(); ++i) {
      const char* t = computeTypeName(k_.exprs[i].type);
      if (kept[i]) out_ << "  " << t << " fx_held" << i << "[" << kHeldCapacity << "];\n";
      if (s_.used[i] && k_.exprs[i].op == IrOp::Reduce) {
        out_ << "  " << t << " fx_red" << i << "[" << kHeldCapacity << "];\n";
      }
    }
  }

  // The values worth keeping: read by a later loop and costing kKeepCost or more to
  // recompute there (softmax's exp); loads and cheap arithmetic are done again, which
  // moves less memory than a store and a reload.
  std::vector<bool> keptValues() const {
    const size_t n = k_.exprs.size();
    std::vector<int> cost(n, 0);
    std::vector<bool> kept(n, false);
    for (size_t i = 0; i < n; ++i) {
      const Expr& e = k_.exprs[i];
      if (!s_.element[i] || e.op == IrOp::Load) continue;
      cost[i] = opCost(e.op);
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
    auto load = [&](const Expr& e) { return rowLoad(k_, e, "fx_e"); };
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
      out_ << indent << "out" << o << "[fx_r * fx_n + fx_e] = "
           << storeConversion(out.dtype, "v" + std::to_string(out.value)) << ";\n";
    }
  }

  void printHeldRow(const std::vector<bool>& kept) {
    const int passes = static_cast<int>(s_.passes.size());
    for (int l = 0; l < passes; ++l) {
      // One elementwise loop (vectorized like any) writes the values to reduce to
      // fx_red<id>; a second combines them.
      const std::vector<ExprId>& reduces = s_.passes[l].reduces;
      out_ << "#pragma GCC ivdep\n    for (int64_t fx_e = 0; fx_e < fx_n; ++fx_e) {\n";
      printHeldBody(l, kept, "      ");
      for (ExprId r : reduces) {
        out_ << "      fx_red" << r << "[fx_e] = v" << k_.exprs[r].args[0] << ";\n";
      }
      out_ << "    }\n";
      printBufferReduction(reduces);
      printExprs(s_.passes[l].after, "    ", "0");
    }
    printRowStores();
    out_ << "#pragma GCC ivdep\n    for (int64_t fx_e = 0; fx_e < fx_n; ++fx_e) {\n";
    printHeldBody(passes, kept, "      ");
    out_ << "    }\n";
  }

  void printRowStores() {
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      const TensorOutput& out = k_.outputs[o];
      if (!out.per_row) continue;
      out_ << "    out" << o << "[fx_r] = "
           << storeConversion(out.dtype, "v" + std::to_string(out.value)) << ";\n";
    }
  }

  // `element` names the row's element index the loads read (row-level loads ignore it).
  void printExprs(const std::vector<ExprId>& ids, const std::string& indent,
                  const std::string& element) {
    auto load = [&](const Expr& e) { return rowLoad(k_, e, element); };
    for (ExprId i : ids) {
      const Expr& e = k_.exprs[i];
      out_ << indent << "const " << computeTypeName(e.type) << " v" << i << " = "
           << formatExpr(k_, e, load) << ";\n";
    }
  }

  const Kernel& k_;
  RowSchedule s_;
  std::ostringstream out_;
};

}  // namespace

std::string printCppRowKernel(const Kernel& kernel) { return CppRowPrinter(kernel).print(); }

}  // namespace fuser::codegen
