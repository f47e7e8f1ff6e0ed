// From kernel IR to a runnable kernel on one device: picks the printer and the
// compiler for the device type.
#pragma once

#include <c10/core/Device.h>

#include <functional>
#include <memory>

#include "codegen/kernel_ir.h"
#include "runtime/compiled_kernel.h"

namespace fuser::runtime {

// FUSER_CROSS_COMPILE: the CUDA form of a CPU kernel through NVRTC for that
// architecture; a failure is counted (stats) and warned about, never raised (the CPU
// kernel is what runs). buildKernel calls it for every CPU kernel.
void crossCompileForCuda(codegen::Kernel kernel);

// Runs `make` (lowering a group and building its kernel), adding its time to
// stats().kernel_build_us. A failure is counted (stats().compile_failures), warned about
// once per `warned`, and gives null: the executor then runs the group unfused.
std::shared_ptr<CompiledKernel> buildOrRunUnfused(
    const std::function<std::shared_ptr<CompiledKernel>()>& make, bool& warned);

// Throws c10::Error when the device is not served or the kernel does not compile.
std::shared_ptr<CompiledKernel> buildKernel(const codegen::Kernel& kernel, c10::Device device);

}  // namespace fuser::runtime
