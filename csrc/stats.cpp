#include "stats.h"

#include <mutex>

namespace fuser {
namespace {
std::mutex sources_mutex;
std::vector<std::string>& sources() {
  static std::vector<std::string> list;
  return list;
}
}  // namespace

Stats& stats() {
  static Stats instance;
  return instance;
}

std::map<std::string, int64_t> statsSnapshot() {
  Stats& s = stats();
  return {{"groups_formed", s.groups_formed.load()},
          {"kernels_compiled", s.kernels_compiled.load()},
          {"disk_cache_hits", s.disk_cache_hits.load()},
          {"memory_cache_hits", s.memory_cache_hits.load()},
          {"guard_failures", s.guard_failures.load()},
          {"compile_failures", s.compile_failures.load()},
          {"kernel_launches", s.kernel_launches.load()},
          {"tiled_launches", s.tiled_launches.load()},
          {"row_launches", s.row_launches.load()},
          {"repeated_calls", s.repeated_calls.load()},
          {"interpreted_runs", s.interpreted_runs.load()},
          {"layout_fallbacks", s.layout_fallbacks.load()},
          {"kernel_build_us", s.kernel_build_us.load()},
          {"cuda_cross_compiles", s.cuda_cross_compiles.load()},
          {"cuda_cross_compile_failures", s.cuda_cross_compile_failures.load()},
          {"one_pass_variance_kernels", s.one_pass_variance_kernels.load()},
          {"batch_statistics_kernels", s.batch_statistics_kernels.load()},
          {"variants_timed", s.variants_timed.load()},
          {"variant_disk_hits", s.variant_disk_hits.load()},
          {"variant_timing_us", s.variant_timing_us.load()},
          {"staged_calls", s.staged_calls.load()},
          {"column_sum_calls", s.column_sum_calls.load()},
          {"column_partial_calls", s.column_partial_calls.load()},
          {"column_in_shared_launches", s.column_in_shared_launches.load()},
          {"workspace_bytes", s.workspace_bytes.load()},
          {"workspace_buffer_bytes", s.workspace_buffer_bytes.load()},
          {"per_shape_hits", s.per_shape_hits.load()},
          {"relayout_gathers", s.relayout_gathers.load()}};
}

void resetStats() {
  Stats& s = stats();
  for (auto* counter :
       {&s.groups_formed, &s.kernels_compiled, &s.disk_cache_hits, &s.memory_cache_hits,
        &s.guard_failures, &s.compile_failures, &s.kernel_launches, &s.tiled_launches, &s.row_launches,
        &s.repeated_calls, &s.interpreted_runs, &s.layout_fallbacks, &s.kernel_build_us,
        &s.cuda_cross_compiles, &s.cuda_cross_compile_failures, &s.one_pass_variance_kernels,
        &s.batch_statistics_kernels, &s.variants_timed,
        &s.variant_disk_hits, &s.variant_timing_us, &s.staged_calls, &s.column_sum_calls,
        &s.column_partial_calls, &s.column_in_shared_launches, &s.workspace_bytes,
        &s.workspace_buffer_bytes, &s.per_shape_hits, &s.relayout_gathers}) {
    counter->store(0);
  }
}

void recordKernelSource(const std::string& source) {
  std::lock_guard<std::mutex> lock(sources_mutex);
  sources().push_back(source);
}

std::vector<std::string> kernelSources() {
  std::lock_guard<std::mutex> lock(sources_mutex);
  return sources();
}

}  // namespace fuser
