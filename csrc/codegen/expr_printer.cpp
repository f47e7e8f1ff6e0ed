#include "codegen/expr_printer.h"

#include <c10/util/Exception.h>

#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>

#include "codegen/expr_analysis.h"

namespace fuser::codegen {
namespace {

using c10::ScalarType;

std::string literal(const Expr& e) {
  const bool f32 = e.type == ScalarType::Float;
  if (e.type == ScalarType::Float || e.type == ScalarType::Double) {
    const double v = e.fvalue;
    // The preludes define these for their compiler.
    if (std::isnan(v)) return f32 ? "FX_NANF" : "FX_NAN";
    if (std::isinf(v)) {
      const std::string inf = f32 ? "FX_INFF" : "FX_INF";
      return v < 0 ? "(-" + inf + ")" : inf;
    }
    std::ostringstream s;
    s << std::setprecision(std::numeric_limits<double>::max_digits10) << std::showpoint << v
      << (f32 ? "f" : "");
    return "(" + s.str() + ")";
  }
  if (e.type == ScalarType::Bool) return e.ivalue ? "true" : "false";
  if (e.ivalue == std::numeric_limits<int64_t>::min()) return "(int64_t)(-9223372036854775807LL - 1)";
  return "((" + std::string(computeTypeName(e.type)) + ")" + std::to_string(e.ivalue) + "LL)";
}

// The prelude helper that converts a floating value to integer type `t`, if any.
const char* floatToIntegerHelper(ScalarType t) {
  switch (t) {
    case ScalarType::Long: return "fx_f2i64";
    case ScalarType::Int: return "fx_f2i32";
    case ScalarType::Short: return "fx_f2i16";
    case ScalarType::Char: return "fx_f2i8";
    case ScalarType::Byte: return "fx_f2u8";
    default: return nullptr;
  }
}

class Formatter {
 public:
  Formatter(const Kernel& k, const Expr& e) : k_(k), e_(e) {
    T_ = computeTypeName(e.type);
    fp_ = e.type == ScalarType::Float || e.type == ScalarType::Double;
    f32_ = e.type == ScalarType::Float;
  }

  std::string a() const { return arg(0); }
  // Argument n in the unsigned type of this int32 or int64 expression.
  std::string unsignedArg(int n) const {
    return std::string(e_.type == ScalarType::Int ? "(uint32_t)" : "(uint64_t)") + arg(n);
  }
  std::string b() const { return arg(1); }
  std::string arg(int n) const { return "v" + std::to_string(e_.args[n]); }
  std::string wrap(const std::string& s) const { return "(" + T_ + ")(" + s + ")"; }
  std::string tmpl(const char* fn, const std::string& args) const {
    return std::string(fn) + "<" + T_ + ">(" + args + ")";
  }
  std::string ab() const { return a() + ", " + b(); }

  // The C math library, as both preludes declare it: name for double, namef for float.
  std::string math(const char* name, const std::string& args) const {
    return std::string(name) + (f32_ ? "f" : "") + "(" + args + ")";
  }
  std::string math1(const char* name) const { return math(name, a()); }
  // The preludes' own float form fx_namef (vectorizable on the CPU: cpp_prelude.h,
  // cpp_vector_math.h, cpp_trig_prelude.h; on the GPU cuda_prelude.h's), the C library's
  // for double.
  std::string ownFloatMath(const char* name, const std::string& args) const {
    return f32_ ? "fx_" + std::string(name) + "f(" + args + ")" : math(name, args);
  }

  bool plainConstant(int n) const {
    const Expr& c = k_.exprs[e_.args[n]];
    return c.op == IrOp::Constant && !std::isnan(c.fvalue);
  }
  // min/max against a constant skip the NaN test of the constant.
  std::string minMax(const char* fn) const {
    const std::string name(fn);
    if (plainConstant(1)) return name + "c<" + T_ + ">(" + a() + ", " + b() + ")";
    if (plainConstant(0)) return name + "c<" + T_ + ">(" + b() + ", " + a() + ")";
    return name + "<" + T_ + ">(" + ab() + ")";
  }

  std::string scalarArg() const {
    const int idx = scalarArrayIndex(k_, e_.index);
    const char* arr = k_.scalars[e_.index] == ScalarArgKind::Double ? "fx_dargs" : "fx_iargs";
    return wrap(std::string(arr) + "[" + std::to_string(idx) + "]");
  }

  const Kernel& k_;
  const Expr& e_;
  std::string T_;
  bool fp_, f32_;
};

}  // namespace

const char* computeTypeName(ScalarType t) {
  switch (t) {
    case ScalarType::Bool: return "bool";
    case ScalarType::Byte: return "uint8_t";
    case ScalarType::Char: return "int8_t";
    case ScalarType::Short: return "int16_t";
    case ScalarType::Int: return "int32_t";
    case ScalarType::Long: return "int64_t";
    case ScalarType::Float: return "float";
    case ScalarType::Double: return "double";
    default: TORCH_CHECK(false, "fuser: no kernel type for ", t);
  }
}

const char* storageTypeName(ScalarType t) {
  if (t == ScalarType::Half || t == ScalarType::BFloat16) return "uint16_t";
  // Bytes, read as bool by the load's cast: GCC vectorizes no loop that loads a bool
  // (no vector type for it), so a mask's masked_fill + softmax ran element by element.
  if (t == ScalarType::Bool) return "uint8_t";
  return computeTypeName(t);
}

std::string storeConversion(ScalarType storage, const std::string& v) {
  if (storage == ScalarType::Half) return "fx_f2h(" + v + ")";
  if (storage == ScalarType::BFloat16) return "fx_f2bf(" + v + ")";
  return v;
}

std::string loadConversion(ScalarType storage, ScalarType compute, const std::string& elem) {
  std::string value = elem;
  if (storage == ScalarType::Half) value = "fx_h2f(" + elem + ")";
  if (storage == ScalarType::BFloat16) value = "fx_bf2f(" + elem + ")";
  return "(" + std::string(computeTypeName(compute)) + ")(" + value + ")";
}

std::string formatExpr(const Kernel& k, const Expr& e,
                       const std::function<std::string(const Expr&)>& load) {
  const Formatter f(k, e);
  const bool fp = f.fp_, f32 = f.f32_, is_bool = e.type == ScalarType::Bool;
  // int32 and int64 add, subtract, multiply and negate in their unsigned types, which
  // wrap as eager's separate kernels store them: signed overflow is undefined, and
  // NVRTC (no -fwrapv there) folds a > a - b into b > 0 across the fused ops.
  const bool wide_int = e.type == ScalarType::Int || e.type == ScalarType::Long;
  switch (e.op) {
    case IrOp::Load:
    case IrOp::ElementIndex: return load(e);
    case IrOp::Scalar: return f.scalarArg();
    case IrOp::Constant: return literal(e);
    case IrOp::Cast:
      if (is_bool) return "(" + f.a() + " != 0)";
      // From bool a select: g++ 12 vectorizes no loop that converts a bool to a float.
      if (k.exprs[e.args[0]].type == ScalarType::Bool) {
        return "(" + f.a() + " ? " + f.wrap("1") + " : " + f.wrap("0") + ")";
      }
      // Floating to integer: the preludes' fx_f2* give eager's values where a plain cast
      // is undefined (NaN, infinities, out of range).
      if (c10::isFloatingType(k.exprs[e.args[0]].type)) {
        if (const char* to_int = floatToIntegerHelper(e.type)) {
          return f.wrap(std::string(to_int) + "(" + f.a() + ")");
        }
      }
      // Integer to floating: g++ 12 (under -fno-trapping-math) turns (float)(int)x into
      // truncf(x) in the scalar loops, which gives -0.0 where x lies in (-1, 0); eager's
      // integer 0 converts to +0.0 (and 1 / that is inf, not -inf). Adding zero does not
      // help (g++ knows a converted integer is never -0.0 and drops the add first); a
      // select of +0.0 for 0 keeps the conversion and still vectorizes.
      if (fp && c10::isIntegralType(k.exprs[e.args[0]].type, /*includeBool=*/false)) {
        return "(" + f.a() + " == 0 ? " + f.wrap("0") + " : " + f.wrap(f.a()) + ")";
      }
      return f.wrap(f.a());
    case IrOp::Neg: return wide_int ? f.wrap("0u - " + f.unsignedArg(0)) : f.wrap("-" + f.a());
    case IrOp::Abs:
      if (is_bool) return f.a();
      return fp ? f.math1("fabs") : f.wrap(f.a() + " < 0 ? -" + f.a() + " : " + f.a());
    case IrOp::Reciprocal: return f.wrap("1 / " + f.a());
    case IrOp::Sqrt: return f.math1("sqrt");
    case IrOp::Rsqrt: return f.wrap("1 / " + f.math1("sqrt"));
    case IrOp::Exp: return f.ownFloatMath("exp", f.a());
    case IrOp::Expm1: return f.ownFloatMath("expm1", f.a());
    case IrOp::Log: return f.ownFloatMath("log", f.a());
    case IrOp::Log1p: return f.ownFloatMath("log1p", f.a());
    case IrOp::Log2: return f.ownFloatMath("log2", f.a());
    case IrOp::Log10: return f.ownFloatMath("log10", f.a());
    case IrOp::Sin: return f.ownFloatMath("sin", f.a());
    case IrOp::Cos: return f.ownFloatMath("cos", f.a());
    case IrOp::Tan: return f.ownFloatMath("tan", f.a());
    case IrOp::Asin: return f.ownFloatMath("asin", f.a());
    case IrOp::Acos: return f.ownFloatMath("acos", f.a());
    case IrOp::Atan: return f.ownFloatMath("atan", f.a());
    case IrOp::Sinh: return f.ownFloatMath("sinh", f.a());
    case IrOp::Cosh: return f.ownFloatMath("cosh", f.a());
    case IrOp::Tanh: return f.ownFloatMath("tanh", f.a());
    case IrOp::Sigmoid: return (f32 ? "fx_sigmoidf(" : "fx_sigmoidd(") + f.a() + ")";
    case IrOp::SigmoidHalf: return "fx_sigmoid_half(" + f.a() + ")";
    case IrOp::Erf: return f.ownFloatMath("erf", f.a());
    case IrOp::Erfc: return f.math1("erfc");
    case IrOp::Floor: return fp ? f.math1("floor") : f.a();
    case IrOp::Ceil: return fp ? f.math1("ceil") : f.a();
    case IrOp::Round: return fp ? f.math1("nearbyint") : f.a();
    case IrOp::Trunc: return fp ? f.math1("trunc") : f.a();
    case IrOp::Sign: return is_bool ? f.a() : f.tmpl("fx_fsign", f.a());
    case IrOp::RoundToHalf: return "fx_round_h(" + f.a() + ")";
    case IrOp::RoundToBFloat16: return "fx_bf2f(fx_f2bf(" + f.a() + "))";
    case IrOp::IsNan: return "(" + f.a() + " != " + f.a() + ")";
    case IrOp::LogicalNot: return "(" + f.a() + " == 0)";
    case IrOp::BitwiseNot: return is_bool ? "(!" + f.a() + ")" : f.wrap("~" + f.a());
    case IrOp::Add:
      if (is_bool) return "(" + f.a() + " || " + f.b() + ")";
      return f.wrap(wide_int ? f.unsignedArg(0) + " + " + f.unsignedArg(1) : f.a() + " + " + f.b());
    case IrOp::Sub:
      return f.wrap(wide_int ? f.unsignedArg(0) + " - " + f.unsignedArg(1) : f.a() + " - " + f.b());
    case IrOp::Mul:
      if (is_bool) return "(" + f.a() + " && " + f.b() + ")";
      return f.wrap(wide_int ? f.unsignedArg(0) + " * " + f.unsignedArg(1) : f.a() + " * " + f.b());
    case IrOp::Div: return fp ? f.wrap(f.a() + " / " + f.b()) : f.tmpl("fx_idiv", f.ab() + ", fx_error");
    case IrOp::Pow: return fp ? f.ownFloatMath("pow", f.ab()) : f.tmpl("fx_ipow", f.ab());
    case IrOp::Atan2: return f.ownFloatMath("atan2", f.ab());
    case IrOp::Fmod:
      return fp ? f.ownFloatMath("fmod", f.ab()) : f.tmpl("fx_imod", f.ab() + ", fx_error");
    case IrOp::Remainder:
      return fp ? f.tmpl("fx_fremainder", f.ab()) : f.tmpl("fx_iremainder", f.ab() + ", fx_error");
    case IrOp::FloorDiv:
      return fp ? f.tmpl("fx_ffloordiv", f.ab()) : f.tmpl("fx_ifloordiv", f.ab() + ", fx_error");
    case IrOp::Min: return f.minMax("fx_min");
    case IrOp::Max: return f.minMax("fx_max");
    case IrOp::Eq: return "(" + f.a() + " == " + f.b() + ")";
    case IrOp::Ne: return "(" + f.a() + " != " + f.b() + ")";
    case IrOp::Lt: return "(" + f.a() + " < " + f.b() + ")";
    case IrOp::Le: return "(" + f.a() + " <= " + f.b() + ")";
    case IrOp::Gt: return "(" + f.a() + " > " + f.b() + ")";
    case IrOp::Ge: return "(" + f.a() + " >= " + f.b() + ")";
    case IrOp::LogicalAnd: return "((" + f.a() + " != 0) & (" + f.b() + " != 0))";
    case IrOp::LogicalOr: return "((" + f.a() + " != 0) | (" + f.b() + " != 0))";
    case IrOp::LogicalXor: return "((" + f.a() + " != 0) != (" + f.b() + " != 0))";
    case IrOp::BitAnd: return f.wrap(f.a() + " & " + f.b());
    case IrOp::BitOr: return f.wrap(f.a() + " | " + f.b());
    case IrOp::BitXor: return f.wrap(f.a() + " ^ " + f.b());
    case IrOp::Select: return "(" + f.arg(0) + " ? " + f.arg(1) + " : " + f.arg(2) + ")";
    case IrOp::RowSize: return f.wrap("fx_n");
    case IrOp::Reduce: return "fx_acc" + std::to_string(&e - k.exprs.data());
    case IrOp::PhiloxUniform:
      return "fx_philox_uniform((uint64_t)" + f.arg(0) + ", (uint64_t)" + f.arg(1) + ", (uint64_t)" +
             f.arg(2) + ")";
  }
  TORCH_CHECK(false, "fuser: no printing rule for ", irOpName(e.op));
}

}  // namespace fuser::codegen
