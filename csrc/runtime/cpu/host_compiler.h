// CPU backend: C++ source compiled by the host compiler ($CXX, else c++) into a shared
// object, cached on disk, loaded with dlopen and run with at::parallel_for.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "codegen/kernel_ir.h"
#include "runtime/compiled_kernel.h"

namespace fuser::runtime {

// Compiles (or loads from the disk cache) `source`, whose kernel function is `name`.
// Each distinct source is compiled once per process. Throws c10::Error with the
// compiler's output when compilation fails. Calls of fewer than `grain` elements run on
// one thread (see cpuGrainSize).
std::shared_ptr<CompiledKernel> compileCpuKernel(const std::string& source,
                                                 const std::string& name, int64_t grain);

// The compiler and flags kernels are built with ("c++ -O3 -march=native ..."), for
// tests that compile a printed kernel again with the compiler's reports.
std::string hostCompileCommand();

// Elements per thread below which splitting a call does not pay: 32768 for a kernel
// of a few simple ops per element (a thread's share then takes some 10 us), fewer for
// kernels with more work per element (an LSTM cell's gates: about 2K).
int64_t cpuGrainSize(const codegen::Kernel& kernel);

}  // namespace fuser::runtime
