// C++ row kernels. Each pass's reductions keep kLanes partial results, element e of the
// row going to partial e % kLanes, so that the host compiler vectorizes the pass (it
// may not reorder one float sum); the partials are combined after the pass.
#include <sstream>

#include "codegen/common_prelude.h"
#include "codegen/cpp_prelude.h"
#include "codegen/expr_printer.h"
#include "codegen/row_printer.h"
#include "codegen/row_schedule.h"

namespace fuser::codegen {
namespace {

constexpr int kLanes = 8;

class CppRowPrinter {
 public:
  explicit CppRowPrinter(const Kernel& k) : k_(k), s_(scheduleRows(k)) {}

  std::string print() {
    out_ << kCppPrelude << kCommonPrelude << kRowHelpers << "\nextern \"C\" void " << k_.name
         << "(void* const* fx_ptrs, const int64_t* fx_sizes, const int64_t* fx_strides,\n"
         << "    const double* fx_dargs, const int64_t* fx_iargs, int32_t* fx_error,\n"
         << "    int64_t fx_begin, int64_t fx_end) {\n";
    printPointers();
    printExprs(s_.constants, "  ", "0");
    out_ << "  for (int64_t fx_r = fx_begin; fx_r < fx_end; ++fx_r) {\n";
    printRowOffsets();
    printExprs(s_.row_start, "    ", "0");
    for (const RowSchedule::Pass& pass : s_.passes) printPass(pass);
    printRowStores();
    out_ << "#pragma GCC ivdep\n    for (int64_t fx_e = 0; fx_e < fx_n; ++fx_e) {\n";
    printExprs(s_.final_element, "      ", "fx_e");
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      const TensorOutput& out = k_.outputs[o];
      if (out.per_row) continue;
      out_ << "      out" << o << "[fx_r * fx_n + fx_e] = "
           << storeConversion(out.dtype, "v" + std::to_string(out.value)) << ";\n";
    }
    out_ << "    }\n  }\n}\n";
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

  void printPass(const RowSchedule::Pass& pass) {
    for (ExprId r : pass.reduces) {
      const Expr& e = k_.exprs[r];
      out_ << "    " << accumulatorType(e) << " fx_acc" << r << "[" << kLanes << "];\n"
           << "    for (int fx_u = 0; fx_u < " << kLanes << "; ++fx_u) fx_acc" << r
           << "[fx_u] = " << reduceIdentity(e) << ";\n";
    }
    out_ << "    {\n    int64_t fx_j = 0;\n"
         << "    for (; fx_j + " << kLanes << " <= fx_n; fx_j += " << kLanes << ") {\n"
         << "      for (int fx_u = 0; fx_u < " << kLanes << "; ++fx_u) {\n"
         << "        const int64_t fx_e = fx_j + fx_u;\n";
    printPassBody(pass, "        ", "fx_u");
    out_ << "      }\n    }\n"
         << "    for (; fx_j < fx_n; ++fx_j) {\n      const int64_t fx_e = fx_j;\n";
    printPassBody(pass, "      ", "0");
    out_ << "    }\n    }\n";
    for (ExprId r : pass.reduces) {
      const Expr& e = k_.exprs[r];
      const char* acc = accumulatorType(e);
      out_ << "    " << acc << " fx_all" << r << " = fx_acc" << r << "[0];\n"
           << "    for (int fx_u = 1; fx_u < " << kLanes << "; ++fx_u) fx_all" << r << " = "
           << reduceCombiner(e) << "<" << acc << ">(fx_all" << r << ", fx_acc" << r
           << "[fx_u]);\n"
           << "    const " << computeTypeName(e.type) << " v" << r << " = ("
           << computeTypeName(e.type) << ")fx_all" << r << ";\n";
    }
    printExprs(pass.after, "    ", "0");
  }

  void printPassBody(const RowSchedule::Pass& pass, const std::string& indent,
                     const std::string& lane) {
    printExprs(pass.element, indent, "fx_e");
    for (ExprId r : pass.reduces) {
      const Expr& e = k_.exprs[r];
      const char* acc = accumulatorType(e);
      out_ << indent << "fx_acc" << r << "[" << lane << "] = " << reduceCombiner(e) << "<" << acc
           << ">(fx_acc" << r << "[" << lane << "], (" << acc << ")v" << e.args[0] << ");\n";
    }
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
