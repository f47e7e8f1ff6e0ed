// The launch policy of CUDA kernels (codegen/cuda_printer.cpp, cudaLaunchShape): how many
// vectors each thread moves and how the grid is sized, on an H100's 132 SMs. Pure host
// code, so it is checked without a GPU.
#include <gtest/gtest.h>

#include "codegen/cuda_printer.h"
#include "codegen/kernel_ir.h"

namespace fuser::codegen {
namespace {

using c10::ScalarType;

constexpr int kSms = 132;

// A kernel adding `inputs` tensors of `dtype`: rows (strided, dense along the row) or flat.
Kernel sumOf(int inputs, ScalarType dtype, bool flat) {
  Kernel k;
  IrBuilder b(k);
  ExprId v = b.load(0, ScalarType::Float);
  for (int i = 0; i < inputs; ++i) {
    TensorInput in{dtype, flat ? Access::Flat : Access::Strided};
    in.inner_unit_stride = !flat;
    k.inputs.push_back(in);
    if (i > 0) v = b.binary(IrOp::Add, v, b.load(i, ScalarType::Float));
  }
  k.outputs.push_back({dtype, v});
  k.ndim = flat ? 1 : 2;
  k.flat = flat;
  k.vectorize = flat;
  return k;
}

CudaLaunchShape launch(const Kernel& k, std::vector<int64_t> sizes) {
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  return cudaLaunchShape(k, cudaVectorShape(k), sizes.data(), numel, kSms);
}

TEST(CudaLaunchShape, LongFloatRowsTakeTwoVectorsAndABlockPerTile) {
  const CudaLaunchShape s = launch(sumOf(2, ScalarType::Float, false), {8192, 8192});
  EXPECT_EQ(s.vectors, 2);
  EXPECT_EQ(s.block, 256);
  EXPECT_EQ(s.grid, 8192 * (8192 / (256 * 4 * 2)));
}

TEST(CudaLaunchShape, HalfRowsAreCappedAtSixtyFourBlocksPerSm) {
  const CudaLaunchShape s = launch(sumOf(2, ScalarType::BFloat16, false), {8192, 8192});
  EXPECT_EQ(s.vectors, 2);
  EXPECT_EQ(s.grid, 64 * kSms);
}

TEST(CudaLaunchShape, RowsHoldingOneVectorPerThreadTakeOne) {
  EXPECT_EQ(launch(sumOf(2, ScalarType::Float, false), {256, 1024}).vectors, 1);
}

TEST(CudaLaunchShape, ManyTensorsKeepOneVectorPerTile) {
  // An LSTM cell's kernel reads 17 tensors: two vectors each would not fit in registers.
  const Kernel cell = sumOf(17, ScalarType::Float, false);
  EXPECT_EQ(cudaVectorShape(cell).row_unroll, 1);
  EXPECT_EQ(launch(cell, {256, 8192}).vectors, 1);
}

TEST(CudaLaunchShape, SmallRowsGoElementWise) {
  const CudaLaunchShape s = launch(sumOf(2, ScalarType::Float, false), {16, 1024});
  EXPECT_EQ(s.vectors, 0);
  EXPECT_GE(s.grid, kSms / 2);  // smaller blocks spread the little work there is
}

TEST(CudaLaunchShape, FlatGridCoversTheWorkOnce) {
  const CudaLaunchShape s = launch(sumOf(2, ScalarType::Float, true), {int64_t{1} << 26});
  EXPECT_EQ(s.vectors, 1);
  EXPECT_EQ(s.grid * s.block * 4, int64_t{1} << 26);
}

}  // namespace
}  // namespace fuser::codegen
