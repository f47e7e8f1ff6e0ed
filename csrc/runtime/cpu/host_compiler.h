// CPU backend: C++ source compiled by the host compiler ($CXX, else c++) into a shared
// object, cached on disk, loaded with dlopen and run with at::parallel_for.
#pragma once

#include <memory>
#include <string>

#include "runtime/compiled_kernel.h"

namespace fuser::runtime {

// Compiles (or loads from the disk cache) `source`, whose kernel function is `name`.
// Each distinct source is compiled once per process. Throws c10::Error with the
// compiler's output when compilation fails.
std::shared_ptr<CompiledKernel> compileCpuKernel(const std::string& source,
                                                 const std::string& name);

}  // namespace fuser::runtime
