// Fresh output tensors for a group's kernel, from the device's registered allocator.
#pragma once

#include <ATen/core/Tensor.h>

namespace fuser::runtime {

// An uninitialized tensor of `sizes` and `strides` (on CUDA from PyTorch's caching
// allocator, which serves the current stream of `device`), as at::empty_strided makes
// it but without its two passes through the dispatcher.
at::Tensor allocateStrided(c10::IntArrayRef sizes, c10::IntArrayRef strides,
                           c10::ScalarType dtype, c10::Device device);

}  // namespace fuser::runtime
