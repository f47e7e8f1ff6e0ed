// A generated kernel ready to run, whatever compiled it. The runtime fills LaunchArgs
// from the iteration plan; each backend launches in its own way.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>

namespace fuser::runtime {

struct LaunchArgs {
  void* const* ptrs;       // tensor inputs, then outputs
  const int64_t* sizes;    // ndim iteration sizes
  const int64_t* strides;  // ndim strides per tensor input, then per strided output
  const double* dargs;
  const int64_t* iargs;
  int ndim;
  int num_inputs;
  int num_outputs;
  int64_t numel;  // elements; rows, for a row kernel
  c10::Device device;
  int64_t grain = 0;  // CPU: units of numel per thread below which one thread runs it; 0: the kernel's
  // CPU: each thread's range starts at a multiple of this many units (rows whose
  // neighbours share cache lines in an output, which two threads writing them at once
  // would pass back and forth).
  int64_t align = 1;
};

class CompiledKernel {
 public:
  virtual ~CompiledKernel() = default;
  // Runs the kernel over all `numel` elements. Throws c10::Error on a kernel-reported
  // error (integer division by zero) or a launch failure.
  virtual void launch(const LaunchArgs& args) const = 0;
  // A CUDA row kernel with column partials (codegen::TensorOutput::column_partial): the
  // rows of partial sums it stores for `rows` rows, one per block of a grid that fills
  // the device once; 0 for other kernels.
  virtual int64_t columnPartialRows(int64_t rows) const {
    (void)rows;
    return 0;
  }
};

}  // namespace fuser::runtime
