// CUDA printer. Flat kernels move `cudaVectorWidth` elements per thread and iteration
// with one aligned access per tensor, then finish the tail element by element;
// strided kernels walk rows of the innermost dimension when it is long, else recover
// each element's multi-index with div/mod; in 32 bits when every offset fits.
#include "codegen/cuda_printer.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "codegen/common_prelude.h"
#include "codegen/cuda_prelude.h"
#include "codegen/expr_analysis.h"
#include "codegen/expr_printer.h"

namespace fuser::codegen {
namespace {

// Shortest innermost dimension walked row by row; below it most threads would idle.
constexpr int kRowPathMinInner = 128;

int storageBytes(c10::ScalarType t) { return static_cast<int>(c10::elementSize(t)); }

std::vector<int> stridedInputs(const Kernel& k) {
  std::vector<int> out;
  if (k.flat) return out;
  for (int i = 0; i < static_cast<int>(k.inputs.size()); ++i) {
    if (k.inputs[i].access == Access::Strided) out.push_back(i);
  }
  return out;
}

std::vector<int> stridedOutputs(const Kernel& k) {
  std::vector<int> out;
  for (int o = 0; o < static_cast<int>(k.outputs.size()); ++o) {
    if (k.outputs[o].access == Access::Strided) out.push_back(o);
  }
  return out;
}

// An offset a strided kernel computes per element, and the FxArgs strides it follows.
struct WalkedTensor {
  std::string offset;   // offN for input N, offoN for output N
  std::string strides;  // stN, soN
};

class CudaPrinter {
 public:
  explicit CudaPrinter(const Kernel& k)
      : k_(k), facts_(analyzeExprs(k)), vec_(cudaVectorWidth(k)) {
    for (int i : stridedInputs(k)) {
      walked_.push_back({"off" + std::to_string(i), "st" + std::to_string(i)});
    }
    for (int o : stridedOutputs(k)) {
      walked_.push_back({"offo" + std::to_string(o), "so" + std::to_string(o)});
    }
  }

  std::string print() {
    out_ << kCudaPrelude << kCommonPrelude << "\n";
    printArgStruct();
    out_ << "extern \"C\" __global__ void __launch_bounds__(" << kCudaBlockSize << ") " << k_.name
         << "(const FxArgs a) {\n"
         << "  typedef " << (k_.index32 ? "int32_t" : "int64_t") << " idx_t;\n"
         << "  int32_t fx_error_sink = 0;\n  int32_t* fx_error = &fx_error_sink;\n"
         << "  (void)fx_error;\n"
         << "  const double* fx_dargs = " << (numDoubles() ? "a.dargs" : "nullptr") << ";\n"
         << "  const int64_t* fx_iargs = " << (numInts() ? "a.iargs" : "nullptr") << ";\n"
         << "  (void)fx_dargs; (void)fx_iargs;\n"
         << "  const idx_t fx_numel = (idx_t)a.numel;\n"
         << "  const idx_t fx_stride = (idx_t)gridDim.x * blockDim.x;\n"
         << "  const idx_t fx_tid = (idx_t)blockIdx.x * blockDim.x + threadIdx.x;\n";
    printExprs(/*invariant=*/true, "  ");
    if (k_.flat) {
      printFlat();
    } else {
      printStrided();
    }
    out_ << "}\n";
    return out_.str();
  }

 private:
  int numDoubles() const {
    return static_cast<int>(std::count(k_.scalars.begin(), k_.scalars.end(), ScalarArgKind::Double));
  }
  int numInts() const { return static_cast<int>(k_.scalars.size()) - numDoubles(); }

  void printArgStruct() {
    out_ << "struct FxArgs {\n";
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      out_ << "  const " << storageTypeName(k_.inputs[i].dtype) << "* in" << i << ";\n";
    }
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      out_ << "  " << storageTypeName(k_.outputs[o].dtype) << "* out" << o << ";\n";
    }
    if (!walked_.empty()) {
      out_ << "  int64_t sizes[" << k_.ndim << "];\n";
      for (const WalkedTensor& w : walked_) {
        out_ << "  int64_t " << w.strides << "[" << k_.ndim << "];\n";
      }
    }
    if (numDoubles()) out_ << "  double dargs[" << numDoubles() << "];\n";
    if (numInts()) out_ << "  int64_t iargs[" << numInts() << "];\n";
    out_ << "  int64_t numel;\n};\n\n";
  }

  void printFlat() {
    std::string start = "fx_tid";
    if (vec_ > 1) {
      const std::string v = std::to_string(vec_);
      out_ << "  const idx_t fx_nvec = fx_numel / " << v << ";\n"
           << "  for (idx_t fx_v = fx_tid; fx_v < fx_nvec; fx_v += fx_stride) {\n";
      for (size_t i = 0; i < k_.inputs.size(); ++i) {
        if (k_.inputs[i].access != Access::Flat) continue;
        const char* t = storageTypeName(k_.inputs[i].dtype);
        out_ << "    const FxVec<" << t << ", " << v << "> l" << i << " = *(const FxVec<" << t
             << ", " << v << ">*)(a.in" << i << " + fx_v * " << v << ");\n";
      }
      for (size_t o = 0; o < k_.outputs.size(); ++o) {
        out_ << "    FxVec<" << storageTypeName(k_.outputs[o].dtype) << ", " << v << "> s" << o
             << ";\n";
      }
      out_ << "#pragma unroll\n    for (int u = 0; u < " << v << "; ++u) {\n";
      vector_lane_ = true;
      printExprs(/*invariant=*/false, "      ");
      for (size_t o = 0; o < k_.outputs.size(); ++o) {
        out_ << "      s" << o << ".v[u] = " << store(o) << ";\n";
      }
      vector_lane_ = false;
      out_ << "    }\n";
      for (size_t o = 0; o < k_.outputs.size(); ++o) {
        out_ << "    *(FxVec<" << storageTypeName(k_.outputs[o].dtype) << ", " << v
             << ">*)(a.out" << o << " + fx_v * " << v << ") = s" << o << ";\n";
      }
      out_ << "  }\n";
      start = "fx_nvec * " + v + " + fx_tid";
    }
    out_ << "  for (idx_t i = " << start << "; i < fx_numel; i += fx_stride) {\n";
    printExprs(/*invariant=*/false, "    ");
    printStores("    ");
    out_ << "  }\n";
  }

  void printStrided() {
    if (k_.ndim >= 1) printStridedRows();
    out_ << "  for (idx_t i = fx_tid; i < fx_numel; i += fx_stride) {\n";
    for (const WalkedTensor& w : walked_) out_ << "    idx_t " << w.offset << " = 0;\n";
    out_ << "    idx_t fx_r = i;\n";
    for (int d = k_.ndim - 1; d >= 0; --d) {
      const std::string size = "(idx_t)a.sizes[" + std::to_string(d) + "]";
      out_ << "    { const idx_t fx_c = fx_r % " << size << "; fx_r /= " << size << ";";
      for (const WalkedTensor& w : walked_) {
        out_ << " " << w.offset << " += fx_c * (idx_t)a." << w.strides << "[" << d << "];";
      }
      out_ << " }\n";
    }
    printExprs(/*invariant=*/false, "    ");
    printStores("    ");
    out_ << "  }\n";
  }

  // When the innermost dimension is long, a block walks whole rows: the multi-index of a
  // row is recovered once (div/mod per outer dimension) and each element of it costs one
  // multiply-add per input, instead of a div and a mod per dimension and element.
  void printStridedRows() {
    const int last = k_.ndim - 1;
    const std::string lastStride = "[" + std::to_string(last) + "]";
    out_ << "  const idx_t fx_inner = (idx_t)a.sizes" << lastStride << ";\n"
         << "  if (fx_inner >= " << kRowPathMinInner << ") {\n"
         << "    const idx_t fx_rows = fx_numel / fx_inner;\n"
         << "    for (idx_t fx_row = blockIdx.x; fx_row < fx_rows; fx_row += gridDim.x) {\n";
    for (const WalkedTensor& w : walked_) out_ << "      idx_t base_" << w.offset << " = 0;\n";
    out_ << "      idx_t fx_r = fx_row;\n";
    for (int d = last - 1; d >= 0; --d) {
      const std::string size = "(idx_t)a.sizes[" + std::to_string(d) + "]";
      out_ << "      { const idx_t fx_c = fx_r % " << size << "; fx_r /= " << size << ";";
      for (const WalkedTensor& w : walked_) {
        out_ << " base_" << w.offset << " += fx_c * (idx_t)a." << w.strides << "[" << d << "];";
      }
      out_ << " }\n";
    }
    out_ << "      for (idx_t fx_j = threadIdx.x; fx_j < fx_inner; fx_j += blockDim.x) {\n"
         << "        const idx_t i = fx_row * fx_inner + fx_j;\n";
    for (const WalkedTensor& w : walked_) {
      out_ << "        const idx_t " << w.offset << " = base_" << w.offset << " + fx_j * (idx_t)a."
           << w.strides << lastStride << ";\n";
    }
    printExprs(/*invariant=*/false, "        ");
    printStores("        ");
    out_ << "      }\n    }\n    return;\n  }\n";
  }

  std::string store(size_t o) const {
    return storeConversion(k_.outputs[o].dtype, "v" + std::to_string(k_.outputs[o].value));
  }

  void printStores(const std::string& indent) {
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      const bool strided = k_.outputs[o].access == Access::Strided;
      out_ << indent << "a.out" << o << "[" << (strided ? "offo" + std::to_string(o) : "i")
           << "] = " << store(o) << ";\n";
    }
  }

  std::string loadExpr(const Expr& e) const {
    const TensorInput& in = k_.inputs[e.index];
    const std::string ref = "a.in" + std::to_string(e.index);
    std::string elem;
    switch (in.access) {
      case Access::Broadcast1: elem = ref + "[0]"; break;
      case Access::Flat:
        elem = vector_lane_ ? "l" + std::to_string(e.index) + ".v[u]" : ref + "[i]";
        break;
      case Access::Strided: elem = ref + "[off" + std::to_string(e.index) + "]"; break;
    }
    return loadConversion(in.dtype, e.type, elem);
  }

  void printExprs(bool invariant, const std::string& indent) {
    auto load = [this](const Expr& e) { return loadExpr(e); };
    for (size_t i = 0; i < k_.exprs.size(); ++i) {
      if (!facts_.used[i] || facts_.invariant[i] != invariant) continue;
      const Expr& e = k_.exprs[i];
      out_ << indent << "const " << computeTypeName(e.type) << " v" << i << " = "
           << formatExpr(k_, e, load) << ";\n";
    }
  }

  const Kernel& k_;
  ExprFacts facts_;
  int vec_;
  std::vector<WalkedTensor> walked_;  // strided inputs, then strided outputs
  bool vector_lane_ = false;
  std::ostringstream out_;
};

}  // namespace

int cudaVectorWidth(const Kernel& k) {
  if (!k.flat || !k.vectorize) return 1;
  int widest = 1;
  for (const TensorInput& in : k.inputs) {
    if (in.access == Access::Flat) widest = std::max(widest, storageBytes(in.dtype));
  }
  for (const TensorOutput& out : k.outputs) widest = std::max(widest, storageBytes(out.dtype));
  return 16 / widest;
}

std::string printCudaKernel(const Kernel& kernel) { return CudaPrinter(kernel).print(); }

std::vector<uint64_t> CudaArgLayout::pack(const Kernel& k, void* const* ptrs,
                                          const int64_t* sizes, const int64_t* strides,
                                          const double* dargs, const int64_t* iargs,
                                          int64_t numel) {
  std::vector<uint64_t> slots;
  const size_t nptr = k.inputs.size() + k.outputs.size();
  for (size_t i = 0; i < nptr; ++i) slots.push_back(reinterpret_cast<uint64_t>(ptrs[i]));
  // Stride rows in FxArgs order: strided inputs, then strided outputs.
  std::vector<int> stride_rows = stridedInputs(k);
  for (int o : stridedOutputs(k)) stride_rows.push_back(k.outputs[o].stride_slot);
  if (!stride_rows.empty()) {
    for (int d = 0; d < k.ndim; ++d) slots.push_back(static_cast<uint64_t>(sizes[d]));
    for (int row : stride_rows) {
      for (int d = 0; d < k.ndim; ++d) {
        slots.push_back(static_cast<uint64_t>(strides[row * k.ndim + d]));
      }
    }
  }
  int nd = 0, ni = 0;
  for (ScalarArgKind kind : k.scalars) (kind == ScalarArgKind::Double ? nd : ni)++;
  for (int i = 0; i < nd; ++i) {
    uint64_t bits;
    std::memcpy(&bits, &dargs[i], sizeof(bits));
    slots.push_back(bits);
  }
  for (int i = 0; i < ni; ++i) slots.push_back(static_cast<uint64_t>(iargs[i]));
  slots.push_back(static_cast<uint64_t>(numel));
  return slots;
}

}  // namespace fuser::codegen
