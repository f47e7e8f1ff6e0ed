// CUDA backend: kernel IR printed as CUDA C++, compiled by NVRTC at first run for the
// device's architecture, cached on disk, launched on PyTorch's current stream.
#pragma once

#include <c10/core/Device.h>

#include <memory>
#include <string>

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

// Launches extern "C" kernel `name` of self-contained CUDA `source` (compiled, or read
// from the disk cache, once per process and device) as `grid` blocks of `block` threads
// on PyTorch's current stream (`grid_y` rows of them); `params` is cuLaunchKernel's
// array of argument pointers.
void launchCudaSource(const std::string& source, const std::string& name, c10::Device device,
                      unsigned grid, unsigned block, void** params, unsigned grid_y = 1);
// The same in two steps, for a caller that launches one source on every call: the kernel
// (compiled or found by hashing its source, once), then its launches.
std::shared_ptr<CompiledKernel> loadCudaSource(const std::string& source, const std::string& name,
                                               c10::Device device);
void launchCudaSource(const CompiledKernel& kernel, c10::Device device, unsigned grid,
                      unsigned block, void** params, unsigned grid_y = 1);

}  // namespace fuser::runtime
