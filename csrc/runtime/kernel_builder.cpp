#include "runtime/kernel_builder.h"

#include <c10/util/Exception.h>

#include "codegen/cpp_printer.h"
#include "runtime/cpu/host_compiler.h"
#include "runtime/cuda/cuda_backend.h"

namespace fuser::runtime {

std::shared_ptr<CompiledKernel> buildKernel(const codegen::Kernel& kernel, c10::Device device) {
  switch (device.type()) {
    case c10::DeviceType::CPU:
      return compileCpuKernel(codegen::printCppKernel(kernel), kernel.name);
    case c10::DeviceType::CUDA:
      return compileCudaKernel(kernel, device);
    default:
      TORCH_CHECK(false, "fuser: no kernel backend for device ", device);
  }
}

}  // namespace fuser::runtime
