#include "runtime/kernel_builder.h"

#include <chrono>

#include <c10/util/Exception.h>

#include <iostream>
#include <mutex>
#include <unordered_set>

#include "codegen/cpp_printer.h"
#include "codegen/cuda_printer.h"
#include "codegen/row_printer.h"
#include "config.h"
#include "runtime/cpu/host_compiler.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "runtime/disk_cache.h"
#include "runtime/hashing.h"
#include "stats.h"

namespace fuser::runtime {

namespace {

// CUDA forms that NVRTC already compiled for this toolchain: in this process, and on disk
// (an empty entry under the source), so that the tests' processes, which share one
// cache directory and build many groups of the same form, compile each form once (an
// NVRTC compile of a row kernel takes a quarter of a second here). Failures are never
// recorded: a failing form fails, and warns, every time it is built.
class CompiledForms {
 public:
  bool seen(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t hash = fnv1a(key);
    if (in_memory_.count(hash)) return true;
    if (!disk_.load(key)) return false;
    in_memory_.insert(hash);
    return true;
  }
  void add(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    in_memory_.insert(fnv1a(key));
    disk_.store(key, "");
  }

 private:
  std::mutex mutex_;
  std::unordered_set<uint64_t> in_memory_;
  DiskCache disk_{"cuda-checked"};
};

}  // namespace

void crossCompileForCuda(codegen::Kernel kernel) {
  const int arch = config().cross_compile_arch;
  kernel.vectorize = kernel.flat;
  const std::string source =
      kernel.rows ? codegen::printCudaRowKernel(kernel) : codegen::printCudaKernel(kernel);
  if (config().dump_kernels) {
    std::cerr << "[fuser] CUDA form of the CPU kernel:\n" << source << std::endl;
  }
  recordKernelSource(source);
  static CompiledForms compiled;
  try {
    // compileToCubin's (and checkSyntax's) options and choice of target follow from these.
    const bool front_only = config().cross_compile_front_only;
    const std::string key = cuda::nvrtcIdentity() + "|sm_" + std::to_string(arch) +
                            "|-std=c++17 -default-device" +
                            (front_only ? " -fdevice-syntax-only\n" : "\n") + source;
    if (!compiled.seen(key)) {
      const cuda::Arch target{arch / 10, arch % 10};
      if (front_only) cuda::checkSyntax(source, target);
      else cuda::compileToCubin(source, target);
      compiled.add(key);
    }
    stats().cuda_cross_compiles++;
  } catch (const std::exception& e) {
    stats().cuda_cross_compiles++;
    stats().cuda_cross_compile_failures++;
    TORCH_WARN("fuser: FUSER_CROSS_COMPILE: the CUDA form of a kernel failed: ", e.what());
  }
}

std::shared_ptr<CompiledKernel> buildOrRunUnfused(
    const std::function<std::shared_ptr<CompiledKernel>()>& make, bool& warned) {
  const auto started = std::chrono::steady_clock::now();
  std::shared_ptr<CompiledKernel> kernel;
  try {
    kernel = make();
  } catch (const std::exception& e) {
    stats().compile_failures++;
    if (!warned) {
      warned = true;
      TORCH_WARN("fuser: a fusion group could not be compiled and runs unfused: ", e.what());
    }
  }
  stats().kernel_build_us += std::chrono::duration_cast<std::chrono::microseconds>(
                                 std::chrono::steady_clock::now() - started)
                                 .count();
  return kernel;
}

std::shared_ptr<CompiledKernel> buildKernel(const codegen::Kernel& kernel, c10::Device device) {
  switch (device.type()) {
    case c10::DeviceType::CPU:
      if (config().cross_compile_arch) crossCompileForCuda(kernel);
      // A row kernel's range counts rows; the launch gives the grain (LaunchArgs::grain).
      if (kernel.rows) return compileCpuKernel(codegen::printCppRowKernel(kernel), kernel.name, 1);
      return compileCpuKernel(codegen::printCppKernel(kernel), kernel.name, cpuGrainSize(kernel));
    case c10::DeviceType::CUDA:
      return kernel.rows ? compileCudaRowKernel(kernel, device) : compileCudaKernel(kernel, device);
    default:
      TORCH_CHECK(false, "fuser: no kernel backend for device ", device);
  }
}

}  // namespace fuser::runtime
