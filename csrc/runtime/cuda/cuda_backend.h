// CUDA backend: kernel IR printed as CUDA C++, compiled by NVRTC at first run for the
// device's architecture, cached on disk, launched on PyTorch's current stream.
#pragma once

#include <c10/core/Device.h>

#include <memory>

#include "codegen/kernel_ir.h"
#include "runtime/compiled_kernel.h"

namespace fuser::runtime {

std::shared_ptr<CompiledKernel> compileCudaKernel(const codegen::Kernel& kernel,
                                                  c10::Device device);

}  // namespace fuser::runtime
