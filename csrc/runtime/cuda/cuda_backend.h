// CUDA backend: kernel IR printed as CUDA C++, compiled by NVRTC at first run for the
// device's architecture, cached on disk, launched on PyTorch's current stream.
#pragma once

#include <c10/core/Device.h>

#include <memory>

#include "codegen/kernel_ir.h"
#include "runtime/compiled_kernel.h"

namespace fuser::runtime {

// A kernel compiled for one shape (Kernel::fixed) also gets its launch's vectors per
// thread written in, so only the path that launch takes is compiled.
std::shared_ptr<CompiledKernel> compileCudaKernel(codegen::Kernel kernel, c10::Device device);

// A row kernel (Kernel::rows, codegen/row_printer.h). Throws c10::Error when its
// arguments do not fit CUDA's parameter space.
std::shared_ptr<CompiledKernel> compileCudaRowKernel(const codegen::Kernel& kernel,
                                                     c10::Device device);

}  // namespace fuser::runtime
