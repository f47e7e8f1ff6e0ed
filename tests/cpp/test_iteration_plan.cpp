// shareEqualStrides (runtime/iteration_plan.cpp): which tensors of a CUDA kernel reuse
// another's offsets. An LSTM cell's kernel reads the chunks of two gate matrices and of
// two biases: each family steps alike, so it needs one offset per family.
// chooseTransposeTiles: which inputs a kernel reads through transpose tiles.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "runtime/iteration_plan.h"
#include "runtime/tensor_view.h"

namespace fuser::runtime {
namespace {

IterationPlan planOf(const std::vector<at::Tensor>& tensors) {
  std::vector<TensorView> views;
  for (const at::Tensor& t : tensors) views.push_back(TensorView::of(t));
  return planIteration(views);
}

IterationPlan sharedPlan(const std::vector<at::Tensor>& tensors) {
  IterationPlan plan = planOf(tensors);
  shareEqualStrides(plan, tensors.size());
  return plan;
}

TEST(ShareEqualStrides, ChunksOfOneTensorShareTheFirstChunksOffsets) {
  const std::vector<at::Tensor> gates = at::randn({4, 12}).chunk(4, 1);
  const std::vector<at::Tensor> bias = at::randn({12}).chunk(4);
  const at::Tensor cell = at::randn({4, 3});
  const IterationPlan plan =
      sharedPlan({cell, gates[0], bias[0], gates[1], bias[1], gates[2], gates[3], bias[2]});
  const std::vector<int32_t> expected = {-1, -1, -1, 1, 2, 1, 1, 2};
  ASSERT_EQ(plan.inputs.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(plan.inputs[i].same_strides_as, expected[i]) << "tensor " << i;
  }
}

TEST(ShareEqualStrides, DifferentStridesOrDenseTensorsKeepTheirOwn) {
  const at::Tensor base = at::randn({8, 8});
  const IterationPlan plan = sharedPlan({base.slice(1, 0, 4), base.t().slice(1, 0, 4),
                                         at::randn({8, 4}), base.slice(1, 2, 6)});
  EXPECT_EQ(plan.inputs[0].same_strides_as, -1);
  EXPECT_EQ(plan.inputs[1].same_strides_as, -1);  // transposed: other strides
  EXPECT_EQ(plan.inputs[2].same_strides_as, -1);  // dense: Flat, no offsets to share
  EXPECT_EQ(plan.inputs[3].same_strides_as, 0);
}

TEST(ShareEqualStrides, OnlyTheFirstCountTensorsTakePart) {
  // Cat slices follow the inputs in a plan; they are addressed through their own strides.
  const at::Tensor base = at::randn({6, 6});
  IterationPlan plan = planIteration(std::vector<TensorView>{
      TensorView::of(base.slice(1, 0, 3)), TensorView::of(base.slice(1, 3, 6))});
  shareEqualStrides(plan, 1);
  EXPECT_EQ(plan.inputs[1].same_strides_as, -1);
}

IterationPlan tiledPlan(const std::vector<at::Tensor>& tensors, int side = 0) {
  IterationPlan plan = planOf(tensors);
  chooseTransposeTiles(plan, tensors.size(), side);
  return plan;
}

TEST(ChooseTransposeTiles, InputsSteppingByOneAlongTheOtherDimAreTransposed) {
  const IterationPlan plan = tiledPlan({at::randn({64, 96}), at::randn({96, 64}).t(),
                                        at::randn({96}), at::randn({64, 1}).expand({64, 96})});
  EXPECT_EQ(plan.transpose_tile, 64);
  EXPECT_FALSE(plan.inputs[0].transposed);  // row-major, as the iteration
  EXPECT_TRUE(plan.inputs[1].transposed);
  EXPECT_FALSE(plan.inputs[2].transposed);  // broadcast along the rows
  EXPECT_FALSE(plan.inputs[3].transposed);  // broadcast along the columns
}

TEST(ChooseTransposeTiles, NchwReadAsNhwcIsATransposeOfItsCollapsedDims) {
  const at::Tensor nchw = at::randn({2, 64, 5, 7});
  const IterationPlan plan = tiledPlan({at::randn({2, 5, 7, 64}), nchw.permute({0, 2, 3, 1})});
  ASSERT_EQ(plan.ndim, 3);  // N, H*W, C
  EXPECT_TRUE(plan.inputs[1].transposed);
}

TEST(ChooseTransposeTiles, DimsShorterThanATileOrDenseInputsTakeNoTiles) {
  EXPECT_EQ(tiledPlan({at::randn({31, 64}), at::randn({64, 31}).t()}).transpose_tile, 0);
  EXPECT_EQ(tiledPlan({at::randn({64, 31}), at::randn({31, 64}).t()}).transpose_tile, 0);
  EXPECT_EQ(tiledPlan({at::randn({64, 64}), at::randn({64, 64})}).transpose_tile, 0);
}

TEST(ChooseTransposeTiles, TilesStopAtTheirSharedMemoryBudget) {
  std::vector<at::Tensor> tensors = {at::randn({40, 70}, at::kDouble)};
  for (int i = 0; i < 6; ++i) tensors.push_back(at::randn({70, 40}, at::kDouble).t());
  const IterationPlan plan = tiledPlan(tensors);
  int tiled = 0;
  for (const auto& in : plan.inputs) tiled += in.transposed;
  EXPECT_EQ(tiled, 3);  // 3 x 8448 bytes within 32 KB; a 4th would pass it
}

TEST(ChooseTransposeTiles, TwoAndFourByteInputsTakePairTilesOf64) {
  const at::Tensor half_t = at::randn({96, 64}).to(at::kHalf).t();
  const at::Tensor float_t = at::randn({96, 64}).t();
  EXPECT_EQ(tiledPlan({at::randn({64, 96}).to(at::kHalf), half_t}).transpose_tile, 64);
  EXPECT_EQ(tiledPlan({at::randn({64, 96}, at::kDouble), half_t}).transpose_tile, 64);
  EXPECT_EQ(tiledPlan({half_t, float_t}).transpose_tile, 64);  // 8448 + 16640 bytes
  EXPECT_EQ(tiledPlan({at::randn({64, 96}), at::randn({96, 64}, at::kDouble).t()}).transpose_tile,
            32);
  EXPECT_EQ(tiledPlan({at::randn({64, 96}).to(at::kByte), at::randn({96, 64}).to(at::kByte).t()})
                .transpose_tile,
            32);
  // An input read across the rows (every other column) cannot be read in pairs.
  EXPECT_EQ(tiledPlan({at::randn({64, 192}).slice(1, 0, 192, 2), half_t}).transpose_tile, 32);
  EXPECT_EQ(tiledPlan({half_t, half_t}, /*side=*/32).transpose_tile, 32);
  const at::Tensor double_t = at::randn({96, 64}, at::kDouble).t();
  EXPECT_EQ(tiledPlan({double_t, at::randn({64, 96})}, 64).transpose_tile, 0);  // past the budget
}

TEST(ChooseTransposeTiles, PairTilesThatDoNotAllFitFallBackToTilesOf32) {
  // Two float tiles of 64 take 33280 bytes, past the 32 KB budget: tiles of 32 hold both.
  const IterationPlan plan =
      tiledPlan({at::randn({70, 70}), at::randn({70, 70}).t(), at::randn({70, 70}).t()});
  EXPECT_EQ(plan.transpose_tile, 32);
  EXPECT_TRUE(plan.inputs[1].transposed && plan.inputs[2].transposed);
  std::vector<at::Tensor> halves = {at::randn({70, 70}, at::kHalf)};
  for (int i = 0; i < 6; ++i) halves.push_back(at::randn({70, 70}, at::kHalf).t());
  int tiled = 0;
  for (const auto& in : tiledPlan(halves).inputs) tiled += in.transposed;
  EXPECT_EQ(tiled, 6);  // 3 of 6 in tiles of 64 (8448 bytes each); all in tiles of 32
}

}  // namespace
}  // namespace fuser::runtime
