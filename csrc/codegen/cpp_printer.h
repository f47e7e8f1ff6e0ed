// Prints a Kernel as C++ for the host compiler: one extern "C" function that runs
// the element range [begin, end) of the iteration space (the runtime splits the
// range across threads with at::parallel_for).
#pragma once

#include <string>

#include "codegen/kernel_ir.h"

namespace fuser::codegen {

// The kernel's C signature (arrays in iteration order, outermost dimension first):
//   void NAME(void* const* ptrs,          // tensor inputs, then outputs
//             const int64_t* sizes,       // ndim sizes of the iteration space
//             const int64_t* strides,     // ndim element strides per tensor input
//             const double* dargs,        // Double scalar arguments
//             const int64_t* iargs,       // Int64 and Bool scalar arguments
//             int32_t* error,             // set to 1 on integer division by zero
//             int64_t begin, int64_t end);
// Outputs are dense in iteration order: element i of the range is at offset i.
using CpuKernelFn = void (*)(void* const*, const int64_t*, const int64_t*, const double*,
                             const int64_t*, int32_t*, int64_t, int64_t);

std::string printCppKernel(const Kernel& kernel);


}  // namespace fuser::codegen
