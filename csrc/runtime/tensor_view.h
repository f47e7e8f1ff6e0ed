// What one kernel launch needs of a tensor: its data pointer, dtype, device, sizes and
// strides, without a TensorImpl. A recurrent cell's group reads a dozen chunk views of
// its inputs per call; building a TensorImpl for each cost more than the planning.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

namespace fuser::runtime {

struct TensorView {
  void* data = nullptr;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  c10::Device device{c10::kCPU};
  c10::SmallVector<int64_t, 6> sizes;
  c10::SmallVector<int64_t, 6> strides;

  static TensorView of(const at::Tensor& t);

  int64_t dim() const { return static_cast<int64_t>(sizes.size()); }
  int64_t numel() const;
  bool isContiguous() const;
  // Every element at its own offset, the offsets filling a range (any dimension order).
  bool isNonOverlappingAndDense() const;
};

}  // namespace fuser::runtime
