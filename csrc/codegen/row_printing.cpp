// What both row printers print alike: the helpers their kernels start with, the
// reductions' combining functions and identities, and element loads.
#include "codegen/expr_printer.h"
#include "codegen/row_printer.h"

namespace fuser::codegen {

const char* const kRowHelpers = R"FUSER(
// Offset of element e of a row whose dims are not one unit-stride run.
FX_INLINE int64_t fx_row_offset(int64_t e, const int64_t* sizes, const int64_t* strides, int nd) {
  int64_t off = 0;
  for (int d = nd - 1; d >= 0; --d) {
    off += (e % sizes[d]) * strides[d];
    e /= sizes[d];
  }
  return off;
}
template <typename T> FX_INLINE T fx_combine_sum(T a, T b) { return a + b; }
template <typename T> FX_INLINE T fx_combine_max(T a, T b) { return fx_max<T>(a, b); }
template <typename T> FX_INLINE T fx_combine_min(T a, T b) { return fx_min<T>(a, b); }
)FUSER";

std::string reduceCombiner(const Expr& e) {
  switch (static_cast<ReduceKind>(e.index)) {
    case ReduceKind::Sum: return "fx_combine_sum";
    case ReduceKind::Max: return "fx_combine_max";
    case ReduceKind::Min: return "fx_combine_min";
  }
  return "?";
}

std::string reduceIdentity(const Expr& e) {
  const bool f32 = e.type == c10::ScalarType::Float;
  switch (static_cast<ReduceKind>(e.index)) {
    case ReduceKind::Sum: return f32 ? "0.0f" : "0.0";
    case ReduceKind::Max: return f32 ? "(-FX_INFF)" : "(-FX_INF)";
    case ReduceKind::Min: return f32 ? "FX_INFF" : "FX_INF";
  }
  return "?";
}

// An element load of a row kernel at element index `e` of the row.
std::string rowLoad(const Kernel& k, const Expr& load, const std::string& e) {
  const TensorInput& in = k.inputs[load.index];
  const std::string n = std::to_string(load.index);
  std::string offset = "off" + n;
  if (!in.inner_zero_stride) {
    offset += in.inner_unit_stride ? " + " + e
                                   : " + fx_row_offset(" + e + ", fx_sizes + " +
                                         std::to_string(k.outer_ndim) + ", st" + n + " + " +
                                         std::to_string(k.outer_ndim) + ", " +
                                         std::to_string(k.inner_ndim) + ")";
  }
  return loadConversion(in.dtype, load.type, "in" + n + "[" + offset + "]");
}

}  // namespace fuser::codegen
