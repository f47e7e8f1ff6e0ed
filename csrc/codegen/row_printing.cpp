// What both row printers print alike: the helpers their kernels start with, the
// reductions' combining functions and identities, pointers and row offsets, element
// loads and expressions, per-row stores.
#include "codegen/expr_printer.h"
#include "codegen/row_printer.h"
#include "codegen/split_rows.h"

#include <algorithm>
#include <functional>

#include <ostream>

namespace fuser::codegen {

const char* const kRowHelpers = R"FUSER(
// Offset of element e (< the row's size) of a row whose dims are not one unit-stride
// run: one division per dim after the first, in 32 bits where the operands fit (a
// 64-bit division is several times slower on a GPU).
FX_INLINE int64_t fx_row_offset(int64_t e, const int64_t* sizes, const int64_t* strides, int nd) {
  int64_t off = 0;
  for (int d = nd - 1; d > 0; --d) {
    const int64_t size = sizes[d];
    int64_t q;
    if ((((uint64_t)e | (uint64_t)size) >> 32) == 0) {
      q = (int64_t)((uint32_t)e / (uint32_t)size);
    } else {
      q = e / size;
    }
    off += (e - q * size) * strides[d];
    e = q;
  }
  return off + e * strides[0];
}
template <typename T> FX_INLINE T fx_combine_sum(T a, T b) { return a + b; }
template <typename T> FX_INLINE T fx_combine_max(T a, T b) { return fx_max<T>(a, b); }
template <typename T> FX_INLINE T fx_combine_min(T a, T b) { return fx_min<T>(a, b); }
)FUSER";

const char* const kCudaWelfordHelpers = R"FUSER(
// A one-pass variance's accumulator: count, mean and sum of squared deviations of the
// elements seen. A trivial aggregate, so that it can live in shared memory; `{}` is
// the empty one.
template <typename T> struct fx_welford {
  T n, mean, m2;
  __device__ __forceinline__ explicit operator T() const { return m2; }
};
// The same triple where it is a row's mean (ReduceKind::WelfordMean).
template <typename T> struct fx_welford_mean {
  T n, mean, m2;
  __device__ __forceinline__ explicit operator T() const { return mean; }
};
// d / n: float's in two instructions (a reciprocal and a product, within 2 ulp for the
// counts here), not IEEE division's dozen: a column variance did one per element.
FX_INLINE float fx_welford_div(float d, float n) { return __fdividef(d, n); }
FX_INLINE double fx_welford_div(double d, double n) { return d / n; }
template <typename W> FX_INLINE W fx_welford_add(W a, decltype(a.n) x) {
  using T = decltype(a.n);
  const T n = a.n + T(1);
  const T d = x - a.mean;
  const T mean = a.mean + fx_welford_div(d, n);
  return W{n, mean, a.m2 + d * (x - mean)};
}
// Chan et al.'s pairwise combination. Without a branch: two empty accumulators give
// the empty one either way, and an early return let the compiler load a partial's mean
// and m2 only after its count, one round trip after the other (a float16 column
// variance of 32768 x 1024, whose last stage combines 64 partials per row: 78 us on the
// H100 that way, 69 without). An empty `a` hands on b's mean as it is: f, b.n / n by an
// approximate reciprocal, need not be exactly 1.
template <typename W> FX_INLINE W fx_combine_welford(W a, W b) {
  using T = decltype(a.n);
  const T n = a.n + b.n;
  const T f = n == T(0) ? T(0) : fx_welford_div(b.n, n);
  const T d = b.mean - a.mean;
  return W{n, a.n == T(0) ? b.mean : a.mean + d * f, a.m2 + b.m2 + d * d * a.n * f};
}
template <typename T> FX_INLINE T fx_shfl_xor(T v, int o) {
  return __shfl_xor_sync(0xffffffffu, v, o);
}
template <typename T> FX_INLINE fx_welford<T> fx_shfl_xor(fx_welford<T> v, int o) {
  return fx_welford<T>{fx_shfl_xor(v.n, o), fx_shfl_xor(v.mean, o), fx_shfl_xor(v.m2, o)};
}
template <typename T> FX_INLINE fx_welford_mean<T> fx_shfl_xor(fx_welford_mean<T> v, int o) {
  return fx_welford_mean<T>{fx_shfl_xor(v.n, o), fx_shfl_xor(v.mean, o), fx_shfl_xor(v.m2, o)};
}
)FUSER";

std::string reduceCombiner(const Expr& e) {
  switch (static_cast<ReduceKind>(e.index)) {
    case ReduceKind::Sum: return "fx_combine_sum";
    case ReduceKind::Max: return "fx_combine_max";
    case ReduceKind::Min: return "fx_combine_min";
    case ReduceKind::SquaredDeviations:
    case ReduceKind::WelfordMean: return "fx_combine_welford";
  }
  return "?";
}

std::string reduceIdentity(const Expr& e) {
  const bool f32 = e.type == c10::ScalarType::Float;
  switch (static_cast<ReduceKind>(e.index)) {
    case ReduceKind::Sum: return f32 ? "0.0f" : "0.0";
    case ReduceKind::Max: return f32 ? "(-FX_INFF)" : "(-FX_INF)";
    case ReduceKind::Min: return f32 ? "FX_INFF" : "FX_INF";
    case ReduceKind::SquaredDeviations:
    case ReduceKind::WelfordMean: return "{}";
  }
  return "?";
}

std::string reduceStep(const Expr& e, const std::string& acc_type, const std::string& acc,
                       const std::string& value) {
  if (isWelford(e)) return "fx_welford_add(" + acc + ", " + value + ")";
  return reduceCombiner(e) + "<" + acc_type + ">(" + acc + ", (" + acc_type + ")" + value + ")";
}

bool isWelford(const Expr& e) {
  if (e.op != IrOp::Reduce) return false;
  const auto kind = static_cast<ReduceKind>(e.index);
  return kind == ReduceKind::SquaredDeviations || kind == ReduceKind::WelfordMean;
}

bool sumsInDouble(const Expr& e) {
  return e.op == IrOp::Reduce && e.type == c10::ScalarType::Float && !e.sum_in_type &&
         static_cast<ReduceKind>(e.index) == ReduceKind::Sum;
}

bool hasWelford(const Kernel& k) { return std::any_of(k.exprs.begin(), k.exprs.end(), isWelford); }

std::string welfordTypeName(const Expr& e) {
  const bool mean = static_cast<ReduceKind>(e.index) == ReduceKind::WelfordMean;
  return std::string(mean ? "fx_welford_mean<" : "fx_welford<") + computeTypeName(e.type) + ">";
}

// An element load of a row kernel at element index `e` of the row.
std::string rowLoad(const Kernel& k, const Expr& load, const std::string& e) {
  if (load.op == IrOp::ElementIndex) return "(fx_r * fx_n + " + e + ")";
  return loadConversion(k.inputs[load.index].dtype, load.type, rowLoadElement(k, load, e));
}

std::string rowLoadElement(const Kernel& k, const Expr& load, const std::string& e) {
  const TensorInput& in = k.inputs[load.index];
  const std::string n = std::to_string(load.index);
  std::string offset = "off" + n;
  if (in.inner_unit_stride) {
    offset += " + " + e;
  } else if (in.inner_zero_stride) {
  } else if (k.inner_ndim == 1) {  // a row of one strided dim
    offset += " + " + e + " * st" + n + "[" + std::to_string(k.outer_ndim) + "]";
  } else {
    offset += " + fx_row_offset(" + e + ", fx_sizes + " + std::to_string(k.outer_ndim) +
              ", st" + n + " + " + std::to_string(k.outer_ndim) + ", " +
              std::to_string(k.inner_ndim) + ")";
  }
  return "in" + n + "[" + offset + "]";
}

void printRowPointers(std::ostream& out, const Kernel& k, const std::string& ptrs,
                      const std::string& strides) {
  const int nd = k.outer_ndim + k.inner_ndim;
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    const char* t = storageTypeName(k.inputs[i].dtype);
    out << "  const " << t << "* __restrict__ in" << i << " = (const " << t << "*)" << ptrs << "["
        << i << "];\n  const int64_t* st" << i << " = " << strides << " + " << i * nd << ";\n"
        << "  (void)st" << i << ";\n";
  }
  for (size_t o = 0; o < k.outputs.size(); ++o) {
    // Column partials are sums kept in their value's type (TensorOutput::column_partial).
    const TensorOutput& output = k.outputs[o];
    const char* t = output.column_partial ? computeTypeName(k.exprs[output.value].type)
                                          : storageTypeName(output.dtype);
    out << "  " << t << "* __restrict__ out" << o << " = (" << t << "*)" << ptrs << "["
        << k.inputs.size() + o << "];\n";
    if (k.strided_outputs) {
      out << "  const int64_t* ost" << o << " = " << strides << " + " << (k.inputs.size() + o) * nd
          << ";\n";
    }
  }
  out << "  int64_t fx_n = 1;\n";
  for (int d = 0; d < k.inner_ndim; ++d) out << "  fx_n *= fx_sizes[" << k.outer_ndim + d << "];\n";
}

void printRowOffsets(std::ostream& out, const Kernel& k, const std::string& indent) {
  const size_t outputs = k.strided_outputs ? k.outputs.size() : 0;
  for (size_t i = 0; i < k.inputs.size(); ++i) out << indent << "int64_t off" << i << " = 0;\n";
  for (size_t o = 0; o < outputs; ++o) out << indent << "int64_t ooff" << o << " = 0;\n";
  out << indent << "{\n" << indent << "  int64_t fx_q = fx_r;\n";
  // Rows number from 0 to the outer dims' product, so what is left for the first dim
  // is its index: no division there (a lone dim of rows needs none at all).
  for (int d = k.outer_ndim - 1; d >= 0; --d) {
    if (d == 0) {
      out << indent << "  { const int64_t fx_idx = fx_q;";
    } else {
      out << indent << "  { const int64_t fx_idx = fx_q % fx_sizes[" << d << "]; fx_q /= fx_sizes["
          << d << "];";
    }
    for (size_t i = 0; i < k.inputs.size(); ++i) {
      out << " off" << i << " += fx_idx * st" << i << "[" << d << "];";
    }
    for (size_t o = 0; o < outputs; ++o) {
      out << " ooff" << o << " += fx_idx * ost" << o << "[" << d << "];";
    }
    out << " }\n";
  }
  out << indent << "}\n";
}

std::string outputRowStart(const Kernel& k, size_t o) {
  if (k.strided_outputs) return "ooff" + std::to_string(o);
  return k.outputs[o].per_row ? "fx_r" : "fx_r * fx_n";
}

std::string outputElement(const Kernel& k, size_t o, const std::string& e, bool nested) {
  const std::string n = std::to_string(o);
  if (k.columns || !k.outputs[o].rows_apart) {
    return "out" + n + "[" + outputRowStart(k, o) + " + " + e + "]";
  }
  TORCH_CHECK(k.strided_outputs, "fuser: a row stored apart needs the output's strides");
  const std::string ost = "ost" + n + "[";
  const std::string d0 = std::to_string(k.outer_ndim), d1 = std::to_string(k.outer_ndim + 1);
  std::string at;
  if (k.inner_ndim == 1) {
    at = "(" + e + ") * " + ost + d0 + "]";
  } else if (nested && k.inner_ndim == 2 && e == "fx_e") {
    at = "fx_i0 * " + ost + d0 + "] + fx_i1 * " + ost + d1 + "]";
  } else {
    at = "fx_row_offset(" + e + ", fx_sizes + " + d0 + ", ost" + n + " + " + d0 + ", " +
         std::to_string(k.inner_ndim) + ")";
  }
  return "out" + n + "[ooff" + n + " + " + at + "]";
}

std::string rowLoadNested(const Kernel& k, const Expr& load) {
  if (load.op == IrOp::ElementIndex) return "(fx_r * fx_n + fx_e)";
  const TensorInput& in = k.inputs[load.index];
  const std::string n = std::to_string(load.index);
  std::string at;
  if (in.inner_unit_stride) {
    at = "in" + n + "[off" + n + " + fx_e]";
  } else if (in.inner_zero_stride || in.row_last_zero_stride) {
    at = (in.inner_zero_stride ? "in" : "fx_p") + n + "[" + (in.inner_zero_stride ? "off" + n : "0") + "]";
  } else if (in.row_last_unit_stride) {
    at = "fx_p" + n + "[fx_i1]";
  } else {
    at = "fx_p" + n + "[fx_i1 * st" + n + "[" + std::to_string(k.outer_ndim + 1) + "]]";
  }
  return loadConversion(in.dtype, load.type, at);
}

void printNestedRowBases(std::ostream& out, const Kernel& k, const std::string& indent) {
  const std::string d0 = std::to_string(k.outer_ndim);
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    const TensorInput& in = k.inputs[i];
    if (in.inner_unit_stride || in.inner_zero_stride) continue;
    const std::string n = std::to_string(i);
    const char* t = storageTypeName(in.dtype);
    out << indent << "const " << t << "* __restrict__ fx_p" << n << " = in" << n << " + off" << n
        << " + fx_i0 * st" << n << "[" << d0 << "];\n";
  }
}

void printRowExprs(std::ostream& out, const Kernel& k, const std::vector<ExprId>& ids,
                   const std::string& indent, const std::string& element) {
  printRowExprs(out, k, ids, indent, [&](const Expr& e) { return rowLoad(k, e, element); });
}

void printRowExprs(std::ostream& out, const Kernel& k, const std::vector<ExprId>& ids,
                   const std::string& indent, const std::function<std::string(const Expr&)>& load) {
  for (ExprId i : ids) {
    const Expr& e = k.exprs[i];
    out << indent << "const " << computeTypeName(e.type) << " v" << i << " = "
        << formatExpr(k, e, load) << ";\n";
  }
}

void printElementStores(std::ostream& out, const Kernel& k, const std::string& indent,
                        bool nested) {
  for (size_t o = 0; o < k.outputs.size(); ++o) {
    const TensorOutput& output = k.outputs[o];
    if (output.per_row) continue;
    out << indent << outputElement(k, o, "fx_e", nested) << " = "
        << storeConversion(output.dtype, "v" + std::to_string(output.value)) << ";\n";
  }
}

void printPerRowStores(std::ostream& out, const Kernel& k, const std::string& indent) {
  for (size_t o = 0; o < k.outputs.size(); ++o) {
    const TensorOutput& output = k.outputs[o];
    if (!output.per_row) continue;
    out << indent << "out" << o << "[" << outputRowStart(k, o) << "] = "
        << storeConversion(output.dtype, "v" + std::to_string(output.value)) << ";\n";
  }
}

int splitCountArg(const Kernel& k) {
  int ints = 0;
  for (ScalarArgKind s : k.scalars) ints += s != ScalarArgKind::Double;
  return ints;
}

int rowIntArgs(const Kernel& k) { return splitCountArg(k) + (k.row_stage >= 0 ? 1 : 0); }

void printSplitBufferPointers(std::ostream& out, const Kernel& k, const RowSchedule& s,
                              const std::string& ptrs) {
  const std::vector<SplitBuffer> buffers = splitBuffers(k, s);
  for (size_t b = 0; b < buffers.size(); ++b) {
    const std::string t = splitBufferTypeName(k, buffers[b]);
    out << "  " << t << "* __restrict__ fx_buf" << b << " = (" << t << "*)" << ptrs << "["
        << k.inputs.size() + k.outputs.size() + b << "];\n  (void)fx_buf" << b << ";\n";
  }
}

void printSplitUnit(std::ostream& out, const Kernel& k, const RowSchedule& s,
                    const std::string& indent) {
  // A last stage storing per-row outputs only runs one unit per row (slice 0).
  const bool per_row = lastStagePerRow(k, s);
  out << indent << "const int64_t fx_splits = fx_iargs[" << splitCountArg(k) << "];\n"
      << indent << "const int64_t fx_r = fx_u / " << (per_row ? "1" : "fx_splits") << ";\n"
      << indent << "const int64_t fx_s = fx_u - fx_r * " << (per_row ? "1" : "fx_splits")
      << ";\n"
      << indent << "const int64_t fx_len = ((fx_n + fx_splits - 1) / fx_splits + "
      << k.row_vector - 1 << ") / " << k.row_vector << " * " << k.row_vector << ";\n"
      << indent << "const int64_t fx_lo = fx_s * fx_len < fx_n ? fx_s * fx_len : fx_n;\n"
      << indent << "const int64_t fx_hi = fx_lo + fx_len < fx_n ? fx_lo + fx_len : fx_n;\n"
      << indent << "(void)fx_s; (void)fx_lo; (void)fx_hi;\n";
}


void printFinishedPasses(std::ostream& out, const Kernel& k, const RowSchedule& s,
                         const std::string& indent, const std::string& store_guard,
                         const LaneSpread* spread) {
  const std::vector<SplitBuffer> buffers = splitBuffers(k, s);
  for (int p = 0; p < k.row_stage; ++p) {
    for (ExprId r : s.passes[p].reduces) {
      const Expr& e = k.exprs[r];
      const char* t = computeTypeName(e.type);
      const std::string v = "v" + std::to_string(r);
      const int values = splitBufferOf(buffers, SplitBuffer::Kind::RowValues, r);
      if (p + 1 < k.row_stage) {
        out << indent << "const " << t << " " << v << " = fx_buf" << values << "[fx_r];\n";
        continue;
      }
      const int partials = splitBufferOf(buffers, SplitBuffer::Kind::Partials, r);
      const std::string acc = splitBufferTypeName(k, buffers[partials]);
      const std::string first = spread ? spread->lane : "0";
      const std::string step = spread ? std::to_string(spread->lanes) : "1";
      out << indent << acc << " fx_fin" << r << " = " << reduceIdentity(e) << ";\n"
          << indent << "for (int64_t fx_q = " << first << "; fx_q < fx_splits; fx_q += " << step
          << ") fx_fin" << r << " = " << reduceCombiner(e) << "<" << acc << ">(fx_fin" << r
          << ", fx_buf" << partials
          // Column kernels number a stage's units slice by slice (column_printer.cpp).
          << (k.columns ? "[fx_q * fx_rows + fx_r]);\n" : "[fx_r * fx_splits + fx_q]);\n");
      if (spread) {
        out << indent << "fx_fin" << r << " = " << spread->combine(e, acc, "fx_fin" + std::to_string(r))
            << ";\n";
      }
      out << indent << "const " << t << " " << v << " = (" << t << ")fx_fin" << r << ";\n";
      if (values >= 0) {
        out << indent << "if (" << store_guard << ") fx_buf" << values << "[fx_r] = " << v
            << ";\n";
      }
    }
    printRowExprs(out, k, s.passes[p].after, indent, "0");
  }
}

void printPartialStores(std::ostream& out, const Kernel& k, const RowSchedule& s,
                        const std::string& indent, const std::string& guard,
                        const std::function<std::string(ExprId)>& value) {
  const std::vector<SplitBuffer> buffers = splitBuffers(k, s);
  out << indent << "if (" << guard << ") {\n";
  for (ExprId r : s.passes[k.row_stage].reduces) {
    out << indent << "  fx_buf" << splitBufferOf(buffers, SplitBuffer::Kind::Partials, r)
        << "[fx_u] = " << value(r) << ";\n";
  }
  out << indent << "}\n";
}

}  // namespace fuser::codegen
