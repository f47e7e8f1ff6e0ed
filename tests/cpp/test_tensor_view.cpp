// TensorView's layout predicates agree with ATen's over the layouts the planner meets:
// contiguous, transposed, channels-last, expanded, sliced, size-1 and empty dimensions.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "runtime/tensor_view.h"

namespace fuser::runtime {
namespace {

std::vector<std::pair<std::string, at::Tensor>> layouts() {
  const at::Tensor base = at::randn({4, 6, 5});
  return {
      {"contiguous", base},
      {"transposed", base.transpose(0, 2)},
      {"permuted", base.permute({1, 2, 0})},
      {"channels_last", at::randn({2, 3, 4, 5}).contiguous(at::MemoryFormat::ChannelsLast)},
      {"expanded", at::randn({6, 1}).expand({6, 5})},
      {"sliced_rows", base.slice(1, 0, 3)},
      {"sliced_inner", base.slice(2, 1, 4)},
      {"every_other", base.slice(0, 0, 4, 2)},
      {"size_one_dims", at::randn({1, 7, 1})},
      {"size_one_odd_stride", at::randn({3, 8}).slice(0, 1, 2)},
      {"empty", at::randn({0, 3})},
      {"zero_dim", at::randn({})},
  };
}

TEST(TensorView, LayoutPredicatesMatchATen) {
  for (const auto& [name, t] : layouts()) {
    const TensorView v = TensorView::of(t);
    EXPECT_EQ(v.isContiguous(), t.is_contiguous()) << name;
    EXPECT_EQ(v.isNonOverlappingAndDense(), t.is_non_overlapping_and_dense()) << name;
    EXPECT_EQ(v.numel(), t.numel()) << name;
    EXPECT_EQ(v.data, t.data_ptr()) << name;
  }
}

}  // namespace
}  // namespace fuser::runtime
