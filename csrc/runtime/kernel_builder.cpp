#include "runtime/kernel_builder.h"

#include <chrono>

#include <c10/util/Exception.h>

#include <iostream>

#include "codegen/cpp_printer.h"
#include "codegen/cuda_printer.h"
#include "codegen/row_printer.h"
#include "config.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "stats.h"
#include "runtime/cpu/host_compiler.h"
#include "runtime/cuda/cuda_backend.h"

namespace fuser::runtime {

void crossCompileForCuda(codegen::Kernel kernel) {
  const int arch = config().cross_compile_arch;
  kernel.vectorize = kernel.flat;
  const std::string source =
      kernel.rows ? codegen::printCudaRowKernel(kernel) : codegen::printCudaKernel(kernel);
  if (config().dump_kernels) {
    std::cerr << "[fuser] CUDA form of the CPU kernel:\n" << source << std::endl;
  }
  recordKernelSource(source);
  try {
    cuda::compileToCubin(source, cuda::Arch{arch / 10, arch % 10});
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
