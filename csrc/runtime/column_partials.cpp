#include "runtime/column_partials.h"

#include <c10/util/Exception.h>

#include <map>
#include <memory>
#include <mutex>

#include "codegen/cuda_prelude.h"
#include "codegen/expr_printer.h"
#include "runtime/cuda/cuda_backend.h"

namespace fuser::runtime {
namespace {

// A block takes 32 columns of one sum; its 8 warps each add every 8th block's partials
// of them, then the first warp adds the warps' sums in order.
constexpr int kColumnsPerBlock = 32;
constexpr int kSlices = 8;

const char* kBody = R"FUSER(
struct FxOutputs { void* p[8]; };
extern "C" __global__ void __launch_bounds__(256) fuser_column_partials(
    const float* __restrict__ partials, long long blocks, long long n, FxOutputs outs) {
  __shared__ float slice_sums[8][33];
  const int lane = threadIdx.x % 32, slice = threadIdx.x / 32;
  const long long column = (long long)blockIdx.x * 32 + lane;
  const float* p = partials + (long long)blockIdx.y * blocks * n + column;
  float t = 0.f;
  if (column < n) {
    for (long long b = slice; b < blocks; b += 8) t += p[b * n];
  }
  slice_sums[slice][lane] = t;
  __syncthreads();
  if (slice != 0 || column >= n) return;
  float total = 0.f;
  #pragma unroll
  for (int s = 0; s < 8; ++s) total += slice_sums[s][lane];
  ((FX_OUT*)outs.p[blockIdx.y])[column] = FX_STORE(total);
}
)FUSER";

}  // namespace

bool columnPartialsFinishable(const std::vector<at::Tensor>& outputs) {
  if (outputs.empty() || outputs.size() > static_cast<size_t>(kMaxColumnSums)) return false;
  for (const at::Tensor& out : outputs) {
    const c10::ScalarType t = out.scalar_type();
    if (t != outputs[0].scalar_type() || !out.is_contiguous()) return false;
    if (t != c10::kFloat && t != c10::kHalf && t != c10::kBFloat16) return false;
  }
  return true;
}

std::string columnPartialsSource(c10::ScalarType dtype) {
  return std::string(codegen::kCudaPrelude) + "#define FX_OUT " + codegen::storageTypeName(dtype) +
         "\n#define FX_STORE(x) " + codegen::storeConversion(dtype, "(x)") + "\n" + kBody;
}

void sumColumnPartials(const at::Tensor& partials, const std::vector<at::Tensor>& outputs) {
  TORCH_INTERNAL_ASSERT(columnPartialsFinishable(outputs) && partials.dim() == 3 &&
                        partials.size(0) == static_cast<int64_t>(outputs.size()));
  struct {
    void* p[kMaxColumnSums];
  } outs = {};
  for (size_t o = 0; o < outputs.size(); ++o) outs.p[o] = outputs[o].data_ptr();
  const void* data = partials.data_ptr();
  long long blocks = partials.size(1);
  long long n = partials.size(2);
  void* params[] = {&data, &blocks, &n, &outs};
  // Built once per dtype and device, and kept: every call with column partials runs it
  // (looking it up by its source would hash the source each time).
  static std::mutex mutex;
  static std::map<std::pair<c10::ScalarType, int>, std::shared_ptr<CompiledKernel>> kernels;
  const c10::ScalarType t = outputs[0].scalar_type();
  const c10::Device device = partials.device();
  std::shared_ptr<CompiledKernel> kernel;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto& slot = kernels[{t, device.index()}];
    if (!slot) slot = loadCudaSource(columnPartialsSource(t), kColumnPartialsKernel, device);
    kernel = slot;
  }
  const auto columns = static_cast<unsigned>((n + kColumnsPerBlock - 1) / kColumnsPerBlock);
  launchCudaSource(*kernel, device, columns, kColumnsPerBlock * kSlices, params,
                   static_cast<unsigned>(outputs.size()));
}

}  // namespace fuser::runtime
