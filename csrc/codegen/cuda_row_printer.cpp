// CUDA row kernels: Kernel::row_lanes threads per row (a warp, or several warps of one
// block), each taking every row_lanes-th element of the row in each pass; a pass's
// partial results meet by warp shuffles, then through shared memory when the row has
// more than one warp. Threads past the last row compute the last row again and store
// nothing, so every thread reaches the block's barriers.
#include <c10/util/Exception.h>

#include <algorithm>
#include <sstream>

#include "codegen/common_prelude.h"
#include "codegen/cuda_prelude.h"
#include "codegen/expr_printer.h"
#include "codegen/row_printer.h"
#include "codegen/row_schedule.h"

namespace fuser::codegen {
namespace {

constexpr int kMinBlock = 256;

const char* kCudaRowHelpers = R"FUSER(
// `v` combined over the L lanes of this thread's row; `part` holds one value per warp
// of the block (L > 32 only).
template <int L, typename T, typename F>
FX_INLINE T fx_row_reduce(T v, F combine, T* part) {
  for (int o = 16; o > 0; o >>= 1) v = combine(v, __shfl_xor_sync(0xffffffffu, v, o));
  if constexpr (L > 32) {
    const int first = (threadIdx.x / L) * (L / 32);
    __syncthreads();
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    v = part[first];
    for (int w = 1; w < L / 32; ++w) v = combine(v, part[first + w]);
  }
  return v;
}
)FUSER";

int nonEmpty(int64_t n) { return static_cast<int>(std::max<int64_t>(n, 1)); }

int countScalars(const Kernel& k, bool doubles) {
  int n = 0;
  for (ScalarArgKind s : k.scalars) n += (s == ScalarArgKind::Double) == doubles;
  return n;
}

class CudaRowPrinter {
 public:
  explicit CudaRowPrinter(const Kernel& k) : k_(k), s_(scheduleRows(k)) {
    TORCH_CHECK(k.row_lanes >= 32 && k.row_lanes <= 1024 && k.row_lanes % 32 == 0,
                "fuser: row lanes must be a multiple of 32 up to 1024");
  }

  std::string print() {
    const int nd = k_.outer_ndim + k_.inner_ndim;
    const int block = cudaRowBlock(k_);
    out_ << kCudaPrelude << kCommonPrelude << kRowHelpers << kCudaRowHelpers
         << "\nstruct FxRowArgs {\n"
         << "  void* ptrs[" << k_.inputs.size() + k_.outputs.size() << "];\n"
         << "  int64_t sizes[" << nd << "];\n"
         << "  int64_t strides[" << nonEmpty(static_cast<int64_t>(k_.inputs.size()) * nd) << "];\n"
         << "  double dargs[" << nonEmpty(countScalars(k_, true)) << "];\n"
         << "  int64_t iargs[" << nonEmpty(countScalars(k_, false)) << "];\n"
         << "  int64_t rows;\n};\n\n"
         << "extern \"C\" __global__ void __launch_bounds__(" << block << ") " << k_.name
         << "(const FxRowArgs a) {\n"
         << "  const int64_t* fx_sizes = a.sizes;\n"
         << "  const double* fx_dargs = a.dargs;\n  const int64_t* fx_iargs = a.iargs;\n"
         << "  (void)fx_dargs; (void)fx_iargs;\n";
    if (k_.row_lanes > 32) {
      out_ << "  __shared__ float fx_partf[" << block / 32 << "];\n"
           << "  __shared__ double fx_partd[" << block / 32 << "];\n";
    }
    printPointers(nd);
    printExprs(s_.constants, "  ", "0");
    const int lanes = k_.row_lanes;
    out_ << "  const int fx_lane = threadIdx.x % " << lanes << ";\n"
         << "  int64_t fx_r = (int64_t)blockIdx.x * " << block / lanes << " + threadIdx.x / "
         << lanes << ";\n"
         << "  const bool fx_live = fx_r < a.rows;\n"
         << "  if (!fx_live) fx_r = a.rows - 1;\n";
    printRowOffsets();
    printExprs(s_.row_start, "  ", "0");
    for (const RowSchedule::Pass& pass : s_.passes) printPass(pass);
    out_ << "  if (!fx_live) return;\n";
    bool per_row = false;
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      const TensorOutput& out = k_.outputs[o];
      if (!out.per_row) continue;
      if (!per_row) out_ << "  if (fx_lane == 0) {\n";
      per_row = true;
      out_ << "    out" << o << "[fx_r] = "
           << storeConversion(out.dtype, "v" + std::to_string(out.value)) << ";\n";
    }
    if (per_row) out_ << "  }\n";
    out_ << "  for (int64_t fx_e = fx_lane; fx_e < fx_n; fx_e += " << lanes << ") {\n";
    printExprs(s_.final_element, "    ", "fx_e");
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      const TensorOutput& out = k_.outputs[o];
      if (out.per_row) continue;
      out_ << "    out" << o << "[fx_r * fx_n + fx_e] = "
           << storeConversion(out.dtype, "v" + std::to_string(out.value)) << ";\n";
    }
    out_ << "  }\n}\n";
    return out_.str();
  }

 private:
  void printPointers(int nd) {
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      const char* t = storageTypeName(k_.inputs[i].dtype);
      out_ << "  const " << t << "* __restrict__ in" << i << " = (const " << t << "*)a.ptrs[" << i
           << "];\n  const int64_t* st" << i << " = a.strides + " << i * nd << ";\n"
           << "  (void)st" << i << ";\n";
    }
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      const char* t = storageTypeName(k_.outputs[o].dtype);
      out_ << "  " << t << "* __restrict__ out" << o << " = (" << t << "*)a.ptrs["
           << k_.inputs.size() + o << "];\n";
    }
    out_ << "  int64_t fx_n = 1;\n";
    for (int d = 0; d < k_.inner_ndim; ++d) {
      out_ << "  fx_n *= fx_sizes[" << k_.outer_ndim + d << "];\n";
    }
  }

  void printRowOffsets() {
    for (size_t i = 0; i < k_.inputs.size(); ++i) out_ << "  int64_t off" << i << " = 0;\n";
    out_ << "  {\n    int64_t fx_q = fx_r;\n";
    for (int d = k_.outer_ndim - 1; d >= 0; --d) {
      out_ << "    { const int64_t fx_idx = fx_q % fx_sizes[" << d << "]; fx_q /= fx_sizes[" << d
           << "];";
      for (size_t i = 0; i < k_.inputs.size(); ++i) {
        out_ << " off" << i << " += fx_idx * st" << i << "[" << d << "];";
      }
      out_ << " }\n";
    }
    out_ << "  }\n";
  }

  void printPass(const RowSchedule::Pass& pass) {
    for (ExprId r : pass.reduces) {
      const Expr& e = k_.exprs[r];
      out_ << "  " << computeTypeName(e.type) << " fx_acc" << r << " = " << reduceIdentity(e)
           << ";\n";
    }
    out_ << "  for (int64_t fx_e = fx_lane; fx_e < fx_n; fx_e += " << k_.row_lanes << ") {\n";
    printExprs(pass.element, "    ", "fx_e");
    for (ExprId r : pass.reduces) {
      const Expr& e = k_.exprs[r];
      out_ << "    fx_acc" << r << " = " << reduceCombiner(e) << "<" << computeTypeName(e.type)
           << ">(fx_acc" << r << ", v" << e.args[0] << ");\n";
    }
    out_ << "  }\n";
    for (ExprId r : pass.reduces) {
      const Expr& e = k_.exprs[r];
      const char* t = computeTypeName(e.type);
      const bool f32 = e.type == c10::ScalarType::Float;
      out_ << "  const " << t << " v" << r << " = fx_row_reduce<" << k_.row_lanes << ">(fx_acc"
           << r << ", [](" << t << " x, " << t << " y) { return " << reduceCombiner(e) << "<" << t
           << ">(x, y); }, " << (k_.row_lanes > 32 ? (f32 ? "fx_partf" : "fx_partd") : "(" +
                                 std::string(t) + "*)nullptr")
           << ");\n";
    }
    printExprs(pass.after, "  ", "0");
  }

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

int cudaRowBlock(const Kernel& kernel) { return std::max(kMinBlock, kernel.row_lanes); }

int64_t cudaRowArgWords(const Kernel& k) {
  const int64_t nd = k.outer_ndim + k.inner_ndim;
  return static_cast<int64_t>(k.inputs.size() + k.outputs.size()) + nd +
         nonEmpty(static_cast<int64_t>(k.inputs.size()) * nd) + nonEmpty(countScalars(k, true)) +
         nonEmpty(countScalars(k, false)) + 1;
}

int cudaRowLanes(int64_t n) {
  int lanes = 32;
  while (lanes < 1024 && n > 16 * lanes) lanes *= 2;
  return lanes;
}

std::string printCudaRowKernel(const Kernel& kernel) { return CudaRowPrinter(kernel).print(); }

}  // namespace fuser::codegen
