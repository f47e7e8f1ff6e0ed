// From kernel IR to a runnable kernel on one device: picks the printer and the
// compiler for the device type.
#pragma once

#include <c10/core/Device.h>

#include <memory>

#include "codegen/kernel_ir.h"
#include "runtime/compiled_kernel.h"

namespace fuser::runtime {

// Throws c10::Error when the device is not served or the kernel does not compile.
std::shared_ptr<CompiledKernel> buildKernel(const codegen::Kernel& kernel, c10::Device device);

}  // namespace fuser::runtime
