#include "runtime/tensor_view.h"

#include <algorithm>
#include <numeric>

namespace fuser::runtime {

TensorView TensorView::of(const at::Tensor& t) {
  TensorView v;
  v.data = const_cast<void*>(t.const_data_ptr());
  v.dtype = t.scalar_type();
  v.device = t.device();
  v.sizes.assign(t.sizes().begin(), t.sizes().end());
  v.strides.assign(t.strides().begin(), t.strides().end());
  return v;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

bool TensorView::isContiguous() const {
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

bool TensorView::isNonOverlappingAndDense() const {
  // c10 calls every empty tensor contiguous, and so dense (whatever its strides).
  if (numel() == 0) return true;
  // Walk the dimensions that matter (size >= 2) from the smallest stride up: each must
  // step exactly over the elements of the ones before it.
  c10::SmallVector<int64_t, 6> order;
  for (int64_t d = 0; d < dim(); ++d) {
    if (sizes[d] >= 2) order.push_back(d);
  }
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return strides[a] < strides[b];
  });
  int64_t expected = 1;
  for (int64_t d : order) {
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

}  // namespace fuser::runtime
