// C++ printer. Every used expression becomes one `const T vN = ...;` line; the ones
// that do not vary per element are printed before the loop.
#include "codegen/cpp_printer.h"

#include <c10/util/Exception.h>

#include <iomanip>
#include <limits>
#include <sstream>

#include "codegen/cpp_prelude.h"
#include "codegen/expr_analysis.h"

namespace fuser::codegen {
namespace {

using c10::ScalarType;

const char* cppComputeType(ScalarType t) {
  switch (t) {
    case ScalarType::Bool: return "bool";
    case ScalarType::Byte: return "uint8_t";
    case ScalarType::Char: return "int8_t";
    case ScalarType::Short: return "int16_t";
    case ScalarType::Int: return "int32_t";
    case ScalarType::Long: return "int64_t";
    case ScalarType::Float: return "float";
    case ScalarType::Double: return "double";
    default: TORCH_CHECK(false, "fuser: no C++ type for ", t);
  }
}

std::string literal(const Expr& e) {
  std::ostringstream s;
  if (e.type == ScalarType::Float || e.type == ScalarType::Double) {
    double v = e.fvalue;
    const char* suffix = e.type == ScalarType::Float ? "f" : "";
    if (std::isnan(v)) return e.type == ScalarType::Float ? "__builtin_nanf(\"\")" : "__builtin_nan(\"\")";
    if (std::isinf(v)) {
      std::string inf = e.type == ScalarType::Float ? "__builtin_inff()" : "__builtin_inf()";
      return v < 0 ? "(-" + inf + ")" : inf;
    }
    s << std::setprecision(std::numeric_limits<double>::max_digits10) << std::showpoint << v
      << suffix;
    return "(" + s.str() + ")";
  }
  if (e.type == ScalarType::Bool) return e.ivalue ? "true" : "false";
  if (e.type == ScalarType::Long && e.ivalue == std::numeric_limits<int64_t>::min()) {
    return "(int64_t)(-9223372036854775807LL - 1)";
  }
  s << "((" << cppComputeType(e.type) << ")" << e.ivalue << "LL)";
  return s.str();
}

// Math function names by computation type: float uses the f-suffixed C functions.
std::string mathCall(const char* name, ScalarType t, const std::string& args) {
  return std::string("std::") + name + "(" + args + ")";
}

class CppPrinter {
 public:
  explicit CppPrinter(const Kernel& k) : k_(k), facts_(analyzeExprs(k)) {}

  std::string print() {
    out_ << kCppPrelude << "\nextern \"C\" void " << k_.name
         << "(void* const* fx_ptrs, const int64_t* fx_sizes, const int64_t* fx_strides,\n"
         << "    const double* fx_dargs, const int64_t* fx_iargs, int32_t* fx_error,\n"
         << "    int64_t fx_begin, int64_t fx_end) {\n";
    printPointers();
    printExprs(/*invariant=*/true, "  ");
    if (k_.flat) {
      printFlatLoop();
    } else {
      printStridedLoop();
    }
    out_ << "}\n";
    return out_.str();
  }

 private:
  void printPointers() {
    const int nin = static_cast<int>(k_.inputs.size());
    for (int i = 0; i < nin; ++i) {
      out_ << "  const " << cppStorageType(k_.inputs[i].dtype) << "* __restrict__ in" << i
           << " = (const " << cppStorageType(k_.inputs[i].dtype) << "*)fx_ptrs[" << i << "];\n";
      if (!k_.flat && k_.inputs[i].access == Access::Strided) {
        out_ << "  const int64_t* st" << i << " = fx_strides + " << i * k_.ndim << ";\n";
      }
    }
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      const char* t = cppStorageType(k_.outputs[o].dtype);
      out_ << "  " << t << "* __restrict__ out" << o << " = (" << t << "*)fx_ptrs[" << nin + o
           << "];\n";
    }
    out_ << "  (void)fx_sizes; (void)fx_strides; (void)fx_dargs; (void)fx_iargs; "
            "(void)fx_error;\n";
  }

  void printFlatLoop() {
    out_ << "#pragma GCC ivdep\n  for (int64_t i = fx_begin; i < fx_end; ++i) {\n";
    printExprs(/*invariant=*/false, "    ");
    printStores("i", "    ");
    out_ << "  }\n";
  }

  // Rows of the innermost dimension: the multi-index is recomputed once per row, and
  // the row's loop has unit/zero strides baked in so that it vectorizes.
  void printStridedLoop() {
    const int nd = k_.ndim;
    out_ << "  const int64_t fx_inner = fx_sizes[" << nd - 1 << "];\n"
         << "  int64_t fx_i = fx_begin;\n"
         << "  while (fx_i < fx_end) {\n"
         << "    const int64_t fx_row = fx_i / fx_inner;\n"
         << "    const int64_t fx_col = fx_i - fx_row * fx_inner;\n"
         << "    const int64_t fx_n = (fx_inner - fx_col) < (fx_end - fx_i) ? (fx_inner - fx_col) "
            ": (fx_end - fx_i);\n";
    std::vector<int> strided;
    for (int i = 0; i < static_cast<int>(k_.inputs.size()); ++i) {
      if (k_.inputs[i].access == Access::Strided) strided.push_back(i);
    }
    for (int i : strided) out_ << "    int64_t off" << i << " = 0;\n";
    if (!strided.empty() && nd > 1) {
      out_ << "    {\n      int64_t fx_r = fx_row;\n";
      for (int d = nd - 2; d >= 0; --d) {
        out_ << "      { const int64_t fx_idx = fx_r % fx_sizes[" << d << "]; fx_r /= fx_sizes["
             << d << "];";
        for (int i : strided) out_ << " off" << i << " += fx_idx * st" << i << "[" << d << "];";
        out_ << " }\n";
      }
      out_ << "    }\n";
    }
    out_ << "    const int64_t fx_base = fx_i - fx_col;\n"
         << "#pragma GCC ivdep\n"
         << "    for (int64_t j = fx_col; j < fx_col + fx_n; ++j) {\n"
         << "      const int64_t i = fx_base + j;\n";
    printExprs(/*invariant=*/false, "      ");
    printStores("i", "      ");
    out_ << "    }\n    fx_i += fx_n;\n  }\n";
  }

  void printStores(const std::string& index, const std::string& indent) {
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      out_ << indent << "out" << o << "[" << index << "] = "
           << storeConversion(k_.outputs[o].dtype, "v" + std::to_string(k_.outputs[o].value))
           << ";\n";
    }
  }

  static std::string storeConversion(ScalarType storage, const std::string& v) {
    switch (storage) {
      case ScalarType::Half: return "fx_f2h(" + v + ")";
      case ScalarType::BFloat16: return "fx_f2bf(" + v + ")";
      default: return v;
    }
  }

  std::string loadExpr(const Expr& e) {
    const TensorInput& in = k_.inputs[e.index];
    std::string ref = "in" + std::to_string(e.index);
    std::string elem;
    switch (in.access) {
      case Access::Broadcast1: elem = ref + "[0]"; break;
      case Access::Flat: elem = ref + "[i]"; break;
      case Access::Strided: {
        std::string off = "off" + std::to_string(e.index);
        std::string last = "st" + std::to_string(e.index) + "[" + std::to_string(k_.ndim - 1) + "]";
        if (in.inner_zero_stride) elem = ref + "[" + off + "]";
        else if (in.inner_unit_stride) elem = ref + "[" + off + " + j]";
        else elem = ref + "[" + off + " + j * " + last + "]";
        break;
      }
    }
    if (in.dtype == ScalarType::Half) elem = "fx_h2f(" + elem + ")";
    if (in.dtype == ScalarType::BFloat16) elem = "fx_bf2f(" + elem + ")";
    return "(" + std::string(cppComputeType(e.type)) + ")(" + elem + ")";
  }

  void printExprs(bool invariant, const std::string& indent) {
    for (size_t i = 0; i < k_.exprs.size(); ++i) {
      if (!facts_.used[i] || facts_.invariant[i] != invariant) continue;
      const Expr& e = k_.exprs[i];
      out_ << indent << "const " << cppComputeType(e.type) << " v" << i << " = " << format(e)
           << ";\n";
    }
  }

  bool isPlainConstant(ExprId id) {
    const Expr& c = k_.exprs[id];
    return c.op == IrOp::Constant && !std::isnan(c.fvalue);
  }

  // min/max against a constant skip the NaN test of the constant.
  std::string minMax(const std::string& fn, const Expr& e) {
    const std::string T = cppComputeType(e.type);
    if (isPlainConstant(e.args[1])) return fn + "c<" + T + ">(" + arg(e, 0) + ", " + arg(e, 1) + ")";
    if (isPlainConstant(e.args[0])) return fn + "c<" + T + ">(" + arg(e, 1) + ", " + arg(e, 0) + ")";
    return fn + "<" + T + ">(" + arg(e, 0) + ", " + arg(e, 1) + ")";
  }

  std::string arg(const Expr& e, int n) { return "v" + std::to_string(e.args[n]); }
  ScalarType argType(const Expr& e, int n) { return k_.exprs[e.args[n]].type; }

  std::string format(const Expr& e) {
    const std::string T = cppComputeType(e.type);
    const bool fp = e.type == ScalarType::Float || e.type == ScalarType::Double;
    const bool f32 = e.type == ScalarType::Float;
    auto a = [&] { return arg(e, 0); };
    auto b = [&] { return arg(e, 1); };
    auto wrap = [&](const std::string& s) { return "(" + T + ")(" + s + ")"; };
    auto fn = [&](const char* name) { return mathCall(name, e.type, a()); };
    switch (e.op) {
      case IrOp::Load: return loadExpr(e);
      case IrOp::Scalar: {
        int idx = scalarArrayIndex(k_, e.index);
        const char* arr = k_.scalars[e.index] == ScalarArgKind::Double ? "fx_dargs" : "fx_iargs";
        return wrap(std::string(arr) + "[" + std::to_string(idx) + "]");
      }
      case IrOp::Constant: return literal(e);
      case IrOp::Cast: {
        ScalarType from = argType(e, 0);
        if (e.type == ScalarType::Bool) return "(" + a() + " != 0)";
        (void)from;
        return wrap(a());
      }
      case IrOp::Neg: return wrap("-" + a());
      case IrOp::Abs:
        if (e.type == ScalarType::Bool) return a();
        return fp ? fn("fabs") : wrap(a() + " < 0 ? -" + a() + " : " + a());
      case IrOp::Reciprocal: return wrap("1 / " + a());
      case IrOp::Sqrt: return fn("sqrt");
      case IrOp::Rsqrt: return wrap("1 / std::sqrt(" + a() + ")");
      case IrOp::Exp: return f32 ? "fx_expf(" + a() + ")" : fn("exp");
      case IrOp::Expm1: return fn("expm1");
      case IrOp::Log: return fn("log");
      case IrOp::Log1p: return fn("log1p");
      case IrOp::Log2: return fn("log2");
      case IrOp::Log10: return fn("log10");
      case IrOp::Sin: return fn("sin");
      case IrOp::Cos: return fn("cos");
      case IrOp::Tan: return fn("tan");
      case IrOp::Asin: return fn("asin");
      case IrOp::Acos: return fn("acos");
      case IrOp::Atan: return fn("atan");
      case IrOp::Sinh: return fn("sinh");
      case IrOp::Cosh: return fn("cosh");
      case IrOp::Tanh: return f32 ? "fx_tanhf(" + a() + ")" : fn("tanh");
      case IrOp::Sigmoid: return f32 ? "fx_sigmoidf(" + a() + ")" : "fx_sigmoidd(" + a() + ")";
      case IrOp::Erf: return f32 ? "fx_erff(" + a() + ")" : fn("erf");
      case IrOp::Erfc: return fn("erfc");
      case IrOp::Floor: return fp ? fn("floor") : a();
      case IrOp::Ceil: return fp ? fn("ceil") : a();
      case IrOp::Round: return fp ? fn("nearbyint") : a();
      case IrOp::Trunc: return fp ? fn("trunc") : a();
      case IrOp::Sign:
        if (e.type == ScalarType::Bool) return a();
        return "fx_fsign<" + T + ">(" + a() + ")";
      case IrOp::IsNan: return "(" + a() + " != " + a() + ")";
      case IrOp::LogicalNot: return "(" + a() + " == 0)";
      case IrOp::BitwiseNot: return e.type == ScalarType::Bool ? "(!" + a() + ")" : wrap("~" + a());
      case IrOp::Add:
        if (e.type == ScalarType::Bool) return "(" + a() + " || " + b() + ")";
        return wrap(a() + " + " + b());
      case IrOp::Sub: return wrap(a() + " - " + b());
      case IrOp::Mul:
        if (e.type == ScalarType::Bool) return "(" + a() + " && " + b() + ")";
        return wrap(a() + " * " + b());
      case IrOp::Div:
        return fp ? wrap(a() + " / " + b()) : "fx_idiv<" + T + ">(" + a() + ", " + b() + ", fx_error)";
      case IrOp::Pow:
        return fp ? "std::pow(" + a() + ", " + b() + ")" : "fx_ipow<" + T + ">(" + a() + ", " + b() + ")";
      case IrOp::Atan2: return "std::atan2(" + a() + ", " + b() + ")";
      case IrOp::Fmod:
        return fp ? "std::fmod(" + a() + ", " + b() + ")"
                  : "fx_imod<" + T + ">(" + a() + ", " + b() + ", fx_error)";
      case IrOp::Remainder:
        return fp ? "fx_fremainder<" + T + ">(" + a() + ", " + b() + ")"
                  : "fx_iremainder<" + T + ">(" + a() + ", " + b() + ", fx_error)";
      case IrOp::FloorDiv:
        return fp ? "fx_ffloordiv<" + T + ">(" + a() + ", " + b() + ")"
                  : "fx_ifloordiv<" + T + ">(" + a() + ", " + b() + ", fx_error)";
      case IrOp::Min: return minMax("fx_min", e);
      case IrOp::Max: return minMax("fx_max", e);
      case IrOp::Eq: return "(" + a() + " == " + b() + ")";
      case IrOp::Ne: return "(" + a() + " != " + b() + ")";
      case IrOp::Lt: return "(" + a() + " < " + b() + ")";
      case IrOp::Le: return "(" + a() + " <= " + b() + ")";
      case IrOp::Gt: return "(" + a() + " > " + b() + ")";
      case IrOp::Ge: return "(" + a() + " >= " + b() + ")";
      case IrOp::LogicalAnd: return "((" + a() + " != 0) & (" + b() + " != 0))";
      case IrOp::LogicalOr: return "((" + a() + " != 0) | (" + b() + " != 0))";
      case IrOp::LogicalXor: return "((" + a() + " != 0) != (" + b() + " != 0))";
      case IrOp::BitAnd: return wrap(a() + " & " + b());
      case IrOp::BitOr: return wrap(a() + " | " + b());
      case IrOp::BitXor: return wrap(a() + " ^ " + b());
      case IrOp::Select: return "(" + arg(e, 0) + " ? " + arg(e, 1) + " : " + arg(e, 2) + ")";
    }
    TORCH_CHECK(false, "fuser: C++ printer has no rule for ", irOpName(e.op));
  }

  const Kernel& k_;
  ExprFacts facts_;
  std::ostringstream out_;
};

}  // namespace

const char* cppStorageType(c10::ScalarType t) {
  if (t == ScalarType::Half || t == ScalarType::BFloat16) return "uint16_t";
  return cppComputeType(t);
}

std::string printCppKernel(const Kernel& kernel) { return CppPrinter(kernel).print(); }

}  // namespace fuser::codegen
