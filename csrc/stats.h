// Process-wide counters behind fuser.stats(), and the list of generated kernel sources.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fuser {

struct Stats {
  std::atomic<int64_t> groups_formed{0};     // FusionGroups the pass guarded (that run)
  std::atomic<int64_t> kernels_compiled{0};  // compiler runs (host compiler or NVRTC)
  std::atomic<int64_t> disk_cache_hits{0};   // kernels loaded from FUSER_CACHE_DIR
  std::atomic<int64_t> memory_cache_hits{0};  // specializations found already compiled
  std::atomic<int64_t> guard_failures{0};    // TypeGuard said no: the fallback ran
  std::atomic<int64_t> compile_failures{0};  // a kernel could not be built: interpreter ran
  std::atomic<int64_t> kernel_launches{0};   // generated kernels run
  std::atomic<int64_t> tiled_launches{0};    // ... of which in transpose tiles
  std::atomic<int64_t> row_launches{0};      // ... of which row kernels (reductions)
  std::atomic<int64_t> repeated_calls{0};    // group calls that reused the last call's plan
  std::atomic<int64_t> interpreted_runs{0};  // groups run through the TorchScript interpreter
  // ... of which because some output's eager shape was not the iteration shape
  std::atomic<int64_t> layout_fallbacks{0};
  std::atomic<int64_t> kernel_build_us{0};   // making kernels: lowering to loading the module
  // FUSER_CROSS_COMPILE checks run (a form NVRTC compiled before passes again, uncompiled)
  std::atomic<int64_t> cuda_cross_compiles{0};
  std::atomic<int64_t> cuda_cross_compile_failures{0};  // ... and failed
  // CUDA row kernels lowered with one-pass variances (Kernel::one_pass_variance), built
  // or cross-compiled
  std::atomic<int64_t> one_pass_variance_kernels{0};
  // batch_norm's batch statistics combined by our CUDA kernel (runtime/batch_norm_statistics.h)
  std::atomic<int64_t> batch_statistics_kernels{0};
  std::atomic<int64_t> variants_timed{0};      // kernel variant choices made by timing them
  std::atomic<int64_t> variant_disk_hits{0};   // ... read from FUSER_CACHE_DIR instead
  std::atomic<int64_t> variant_timing_us{0};   // time spent timing variants
  // Reducing group calls run as several kernels (rows cut in slices), the workspace
  // bytes they allocated, and what one allocation per buffer would have taken.
  std::atomic<int64_t> staged_calls{0};
  // Leading-dims sums a row kernel computed beside its rows (row_executor.h): calls, and
  // of those the ones whose kernel kept partial sums (TensorOutput::column_partial)
  // rather than writing the summed values whole for ATen's sum.
  std::atomic<int64_t> column_sum_calls{0};
  std::atomic<int64_t> column_partial_calls{0};
  // Launches of CUDA column kernels that copy their rows into shared memory first.
  std::atomic<int64_t> column_in_shared_launches{0};
  std::atomic<int64_t> workspace_bytes{0};
  std::atomic<int64_t> workspace_buffer_bytes{0};
  // fuser::PerShapeValues calls that handed back values kept from an earlier call
  std::atomic<int64_t> per_shape_hits{0};
  // fuser::Relayout calls that moved their elements in one gather
  std::atomic<int64_t> relayout_gathers{0};
};

Stats& stats();
std::map<std::string, int64_t> statsSnapshot();
void resetStats();

// Source text of every kernel compiled (or loaded from disk) in this process.
void recordKernelSource(const std::string& source);
std::vector<std::string> kernelSources();

}  // namespace fuser
