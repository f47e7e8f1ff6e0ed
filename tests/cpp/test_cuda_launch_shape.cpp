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

// gelu's erf over the sum of `inputs` float tensors, rows or flat (sumOf's layout).
Kernel erfOfSum(int inputs, bool flat, ScalarType dtype = ScalarType::Float) {
  Kernel k = sumOf(inputs, dtype, flat);
  IrBuilder b(k);
  k.outputs[0].value = b.unary(IrOp::Erf, k.outputs[0].value);
  return k;
}

TEST(CudaLaunchShape, HeavyFloatRowsTakeTwoVectorsInBlocksOf128AndABlockPerTile) {
  const CudaLaunchShape s = launch(erfOfSum(2, false), {8192, 8192});
  EXPECT_EQ(s.vectors, 2);
  EXPECT_EQ(s.block, 128);
  EXPECT_EQ(s.grid_x, 8192 / (128 * 4 * 2));  // the tiles of a row
  EXPECT_EQ(s.grid_y, 8192);                  // every row its own blocks
  // Light rows too where a thread could not hold four vectors per input (4 inputs: 17).
  EXPECT_EQ(cudaBlockSize(sumOf(4, ScalarType::Float, false)), 128);
  EXPECT_EQ(cudaVectorShape(sumOf(4, ScalarType::Float, false)).row_unroll, 2);
}

TEST(CudaLaunchShape, LightFloatRowsHoldingFourVectorsKeepBlocksOf256) {
  const CudaLaunchShape s = launch(sumOf(2, ScalarType::Float, false), {8192, 8192});
  EXPECT_EQ(s.vectors, 4);
  EXPECT_EQ(s.block, 256);
  EXPECT_EQ(s.grid_x, 8192 / (256 * 4 * 4));
  EXPECT_EQ(s.grid_y, 8192);
  EXPECT_FALSE(floatRowKernel(sumOf(2, ScalarType::Float, false)));
  EXPECT_EQ(cudaBlockSize(sumOf(2, ScalarType::Double, false)), 256);
}

TEST(CudaLaunchShape, RowsTakeTheMostVectorsTheRowFills) {
  // Heavy floats are printed for two: a row of 1024 fills two per thread, one of 512 one.
  EXPECT_EQ(launch(erfOfSum(2, false), {256, 1024}).vectors, 2);
  EXPECT_EQ(launch(erfOfSum(2, false), {256, 512}).vectors, 1);
  // Light ones for four, in blocks of 256: 4096 fill four, 2048 two.
  EXPECT_EQ(launch(sumOf(2, ScalarType::Float, false), {256, 4096}).vectors, 4);
  EXPECT_EQ(launch(sumOf(2, ScalarType::Float, false), {256, 2048}).vectors, 2);
  // Doubles for four, in blocks of 256: 2048 fill four, 1024 two.
  EXPECT_EQ(launch(sumOf(2, ScalarType::Double, false), {256, 2048}).vectors, 4);
  EXPECT_EQ(launch(sumOf(2, ScalarType::Double, false), {256, 1024}).vectors, 2);
}

TEST(CudaLaunchShape, HalfRowsAreCappedAtSixtyFourBlocksPerSm) {
  const CudaLaunchShape s = launch(sumOf(2, ScalarType::BFloat16, false), {8192, 8192});
  EXPECT_EQ(s.vectors, 2);
  EXPECT_EQ(s.grid_x, 8192 / (256 * 8 * 2));
  EXPECT_EQ(s.grid_x * s.grid_y, 64 * kSms);
}

TEST(CudaLaunchShape, RowsBeyondTheGridLimitAreWalkedByFewerBlocks) {
  const CudaLaunchShape s = launch(sumOf(2, ScalarType::Float, false), {1 << 20, 1024});
  EXPECT_EQ(s.grid_x, 1);
  EXPECT_EQ(s.grid_y, 65535);  // gridDim.y's limit; each block then walks 16 or 17 rows
}

TEST(CudaLaunchShape, RowsShorterThanABlockTakeBlocksAsWideAsTheRow) {
  // A channels-last convnet's epilogue: rows of C = 256 floats, 64 vectors of four.
  const CudaLaunchShape s = launch(sumOf(2, ScalarType::Float, false), {32 * 56 * 56, 256});
  EXPECT_EQ(s.vectors, 1);
  EXPECT_EQ(s.block, 64);
  EXPECT_EQ(s.grid_x, 1);
  // C = 768: 192 threads (a light row keeps blocks of 256); rows of 128 floats still
  // take two warps.
  EXPECT_EQ(launch(sumOf(2, ScalarType::Float, false), {32 * 28 * 28, 768}).block, 192);
  EXPECT_EQ(launch(sumOf(2, ScalarType::Float, false), {32 * 28 * 28, 128}).block, 64);
}

TEST(CudaLaunchShape, RowsHoldingOneVectorPerThreadTakeOne) {
  EXPECT_EQ(launch(sumOf(2, ScalarType::Float, false), {256, 1024}).vectors, 1);
  EXPECT_EQ(launch(erfOfSum(2, false), {256, 512}).vectors, 1);
  EXPECT_EQ(launch(sumOf(2, ScalarType::Half, false), {256, 2048}).vectors, 1);
}

TEST(CudaLaunchShape, UnrollingStopsAtTwelveVectorsHeld) {
  // Held: (inputs + output) + inputs x (unroll - 1).
  EXPECT_EQ(cudaVectorShape(sumOf(2, ScalarType::Float, false)).row_unroll, 4);   // 9
  EXPECT_EQ(cudaVectorShape(sumOf(3, ScalarType::Float, false)).row_unroll, 2);   // 13, then 7
  EXPECT_EQ(cudaVectorShape(sumOf(5, ScalarType::Float, false)).row_unroll, 2);   // 11
  EXPECT_EQ(cudaVectorShape(sumOf(6, ScalarType::Float, false)).row_unroll, 1);   // 13
  EXPECT_EQ(cudaVectorShape(sumOf(3, ScalarType::Double, false)).row_unroll, 2);  // 13, then 7
  EXPECT_EQ(cudaVectorShape(erfOfSum(2, false)).row_unroll, 2);  // heavy floats: two
  EXPECT_EQ(cudaVectorShape(sumOf(2, ScalarType::Half, false)).row_unroll, 2);  // half: two
}

TEST(CudaLaunchShape, FloatRowsWithMuchMathPerByteAreKeptToAFullSmOfBlocks) {
  // An erf per element (21 units with the loads, sum and store) over the output's 4
  // bytes (strided inputs are not counted): 16 blocks of 128 threads, 32 registers each.
  EXPECT_EQ(minBlocksPerSm(erfOfSum(2, false)), 16);
  EXPECT_TRUE(floatRowKernel(erfOfSum(2, false)));
  // Three inputs hold 7 vectors (4 of a step, 3 more): more than the 5 capped, and a
  // float row kernel all the same (heavy; nor could a thread hold four: 13 vectors).
  EXPECT_TRUE(floatRowKernel(erfOfSum(3, false)));
  EXPECT_EQ(minBlocksPerSm(erfOfSum(3, false)), 0);
  // Heavy with two outputs (the sum and its erf): 6 vectors held at two, 10 at four; the
  // float rows' shape for its math, without the cap.
  Kernel two_outputs = erfOfSum(2, false);
  two_outputs.outputs.push_back({ScalarType::Float, two_outputs.exprs[two_outputs.outputs[0].value].args[0]});
  EXPECT_TRUE(floatRowKernel(two_outputs));
  EXPECT_EQ(cudaBlockSize(two_outputs), 128);
  EXPECT_EQ(cudaVectorShape(two_outputs).row_unroll, 2);
  EXPECT_EQ(minBlocksPerSm(two_outputs), 0);
  // Heavy doubles keep their blocks of 256, four vectors and no cap.
  EXPECT_FALSE(floatRowKernel(erfOfSum(2, false, ScalarType::Double)));
  EXPECT_EQ(cudaBlockSize(erfOfSum(2, false, ScalarType::Double)), 256);
  EXPECT_EQ(cudaVectorShape(erfOfSum(2, false, ScalarType::Double)).row_unroll, 4);
  EXPECT_EQ(minBlocksPerSm(erfOfSum(2, false, ScalarType::Double)), 0);
  // A light row holding four vectors per input is not a float row kernel at all.
  EXPECT_FALSE(floatRowKernel(sumOf(2, ScalarType::Float, false)));
  // An add per 12 bytes: no cap; nor for flat kernels, or rows of halves.
  EXPECT_EQ(minBlocksPerSm(sumOf(2, ScalarType::Float, false)), 0);
  EXPECT_EQ(minBlocksPerSm(erfOfSum(2, true)), 0);
  Kernel half_rows = erfOfSum(2, false);
  for (TensorInput& in : half_rows.inputs) in.dtype = ScalarType::Half;
  half_rows.outputs[0].dtype = ScalarType::Half;
  EXPECT_FALSE(floatRowKernel(half_rows));
  EXPECT_EQ(minBlocksPerSm(half_rows), 0);
  EXPECT_EQ(cudaBlockSize(half_rows), 256);
}

TEST(CudaLaunchShape, FloatRowsDrawingRandomNumbersKeepBlocksOf256AndFourVectors) {
  // bias + gelu + dropout over 8192 x 8192 floats ran 9% slower in the float rows' shape.
  Kernel k = erfOfSum(2, false);
  IrBuilder b(k);
  const ExprId u = b.philoxUniform(b.scalar(0, ScalarType::Long), b.scalar(1, ScalarType::Long));
  k.scalars = {ScalarArgKind::Int64, ScalarArgKind::Int64};
  k.outputs[0].value = b.binary(IrOp::Mul, k.outputs[0].value, u);
  EXPECT_FALSE(floatRowKernel(k));
  EXPECT_EQ(minBlocksPerSm(k), 0);
  EXPECT_EQ(cudaBlockSize(k), 256);
  EXPECT_EQ(cudaVectorShape(k).row_unroll, 4);
}

TEST(CudaLaunchShape, ManyTensorsGoElementWise) {
  // A thread holding one vector per tensor may hold at most 8: 7 inputs and the output
  // do, 8 inputs and the output go element-wise, as does an LSTM cell's 17 + 2.
  EXPECT_EQ(cudaVectorShape(sumOf(7, ScalarType::Float, false)).row_width, 4);
  EXPECT_EQ(cudaVectorShape(sumOf(8, ScalarType::Float, false)).row_width, 1);
  const CudaLaunchShape s = launch(sumOf(17, ScalarType::Float, false), {256, 1024});
  EXPECT_EQ(s.vectors, 0);
  EXPECT_EQ(s.grid_x * s.block, 1024);  // one element per thread and tile
  EXPECT_EQ(s.grid_y, 256);
}

TEST(CudaLaunchShape, SmallRowsGoElementWise) {
  const CudaLaunchShape s = launch(sumOf(2, ScalarType::Float, false), {16, 1024});
  EXPECT_EQ(s.vectors, 0);
  EXPECT_GE(s.grid_x * s.grid_y, kSms / 2);  // smaller blocks spread the little work there is
}

TEST(CudaLaunchShape, FlatGridCoversTheWorkOnce) {
  const CudaLaunchShape s = launch(sumOf(2, ScalarType::Float, true), {int64_t{1} << 26});
  EXPECT_EQ(s.vectors, 1);
  EXPECT_EQ(s.grid_y, 1);
  EXPECT_EQ(s.grid_x * s.block * 4, int64_t{1} << 26);  // four floats per thread
}

TEST(CudaLaunchShape, FlatKernelsMoveSixteenBytesPerAccess) {
  EXPECT_EQ(cudaVectorWidth(sumOf(2, ScalarType::Float, true)), 4);
  EXPECT_EQ(cudaVectorWidth(sumOf(2, ScalarType::Half, true)), 8);
  EXPECT_EQ(cudaVectorWidth(sumOf(2, ScalarType::Double, true)), 2);
}

TEST(CudaLaunchShape, FlatSixteenByteVectorsRunInBlocksOf1024) {
  EXPECT_EQ(cudaBlockSize(sumOf(2, ScalarType::Half, true)), 1024);
  EXPECT_EQ(cudaBlockSize(sumOf(2, ScalarType::Double, true)), 1024);
  EXPECT_EQ(cudaBlockSize(sumOf(2, ScalarType::Float, true)), 1024);
  EXPECT_EQ(cudaBlockSize(sumOf(2, ScalarType::Half, false)), 256);  // rows
  // 7 inputs and the output hold 8 vectors (32 registers); one more keeps 256 threads.
  EXPECT_EQ(cudaBlockSize(sumOf(7, ScalarType::Half, true)), 1024);
  EXPECT_EQ(cudaBlockSize(sumOf(8, ScalarType::Half, true)), 256);
  EXPECT_EQ(cudaBlockSize(sumOf(7, ScalarType::Float, true)), 1024);  // four floats each
  EXPECT_EQ(cudaBlockSize(sumOf(8, ScalarType::Float, true)), 256);
  Kernel unaligned = sumOf(2, ScalarType::Half, true);
  unaligned.vectorize = false;  // element-wise
  EXPECT_EQ(cudaBlockSize(unaligned), 256);

  const CudaLaunchShape s = launch(sumOf(2, ScalarType::Half, true), {int64_t{1} << 26});
  EXPECT_EQ(s.block, 1024);
  EXPECT_EQ(s.grid_x * s.block * 8, int64_t{1} << 26);  // eight halves per thread
}

TEST(CudaLaunchShape, SmallFlatWorkShrinksWideBlocksToReachEverySm) {
  // 2^15 halves are 4096 vectors: 4 blocks of 1024, so blocks shrink to 64 threads.
  const CudaLaunchShape s = launch(sumOf(2, ScalarType::Half, true), {int64_t{1} << 15});
  EXPECT_EQ(s.block, 64);
  EXPECT_EQ(s.grid_x, 64);
}

TEST(CudaLaunchShape, TransposeTilesTakeABlockPerTileAndTheOuterIndicesInY) {
  Kernel k = sumOf(2, ScalarType::Float, /*flat=*/false);
  k.ndim = 3;
  k.transpose_tile = 32;
  k.inputs[1].transposed = true;
  k.inputs[1].inner_unit_stride = false;
  const CudaLaunchShape shape = launch(k, {3, 100, 70});  // tiles of 32: 4 x 3
  EXPECT_EQ(shape.grid_x, 12);
  EXPECT_EQ(shape.grid_y, 3);
  EXPECT_EQ(shape.block, kCudaBlockSize);
  EXPECT_EQ(shape.vectors, 0);
  EXPECT_EQ(launch(k, {100000, 32, 32}).grid_y, 65535);  // the rest walked in y
  k.transpose_tile = 64;
  EXPECT_EQ(launch(k, {3, 100, 70}).grid_x, 4);  // tiles of 64: 2 x 2
}

// x * g: x dense over the whole iteration space (Flat), g broadcast along the rows (a
// squeeze-excite gate over [N, C, H, W] collapsed to [N * C, H * W]).
Kernel gate(ScalarType dtype) {
  Kernel k;
  IrBuilder b(k);
  ExprId v = b.binary(IrOp::Mul, b.load(0, ScalarType::Float), b.load(1, ScalarType::Float));
  k.inputs.push_back({dtype, Access::Flat});
  TensorInput g{dtype, Access::Strided};
  g.inner_zero_stride = true;
  k.inputs.push_back(g);
  k.outputs.push_back({dtype, v});
  k.ndim = 2;
  k.flat = false;
  return k;
}

TEST(CudaLaunchShape, RowsThatAreNotWholeVectorsOrShortAreWalkedAsFlatVectors) {
  // Rows of 7 x 7, of 15 x 15 (longer than the row path's 128) and of 14 x 14 (whole
  // vectors, but fewer than a block's): one flat vector per thread and step, the grid
  // sized as for flat vectors.
  for (int64_t inner : {49, 225, 196}) {
    const CudaLaunchShape s = launch(gate(ScalarType::Float), {256 * 1152, inner});
    EXPECT_EQ(s.vectors, 1) << inner;
    EXPECT_EQ(s.grid_y, 1) << inner;
    EXPECT_EQ(s.grid_x * s.block * 4, 256 * 1152 * inner) << inner;
  }
  // Rows of whole vectors that fill a block keep the row path (56 x 56); rows shorter
  // than a vector go element-wise.
  EXPECT_GT(launch(gate(ScalarType::Float), {256 * 64, 3136}).grid_y, 1);
  EXPECT_EQ(launch(gate(ScalarType::Half), {256 * 1152, 7}).vectors, 0);
  // An input read along the rows that is not Flat (a slice) is read lane by lane there.
  Kernel sliced = gate(ScalarType::Float);
  sliced.inputs[0].access = Access::Strided;
  sliced.inputs[0].inner_unit_stride = true;
  EXPECT_EQ(launch(sliced, {256 * 1152, 225}).grid_y, 1);
  EXPECT_EQ(launch(sliced, {256 * 1152, 49}).vectors, 1);
  // An output that is not Flat (a slice of a cat's buffer) keeps the row path.
  Kernel into_cat = gate(ScalarType::Float);
  into_cat.outputs[0].access = Access::Strided;
  into_cat.outputs[0].inner_unit_stride = true;
  into_cat.outputs[0].stride_slot = 2;
  EXPECT_GT(launch(into_cat, {256 * 1152, 225}).grid_y, 1);
  EXPECT_EQ(launch(into_cat, {256 * 1152, 49}).vectors, 0);
}

TEST(CudaLaunchShape, FloatRowLaunchesNeverExceedTheBlockTheyWerePrintedFor) {
  // Every path of a float row kernel (rows, short rows, straddling vectors, elements,
  // blocks shrunk for little work) launches at most kFloatRowBlockSize threads.
  Kernel sigmoid_gate = gate(ScalarType::Float);  // sigmoid(x * g): heavy, 3 vectors held
  IrBuilder b(sigmoid_gate);
  sigmoid_gate.outputs[0].value = b.unary(IrOp::Sigmoid, sigmoid_gate.outputs[0].value);
  const Kernel kernels[] = {erfOfSum(2, false), sumOf(4, ScalarType::Float, false), sigmoid_gate};
  for (const Kernel& k : kernels) {
    ASSERT_EQ(cudaBlockSize(k), 128);
    for (int64_t rows : {1, 3, 16, 300, 70000}) {
      for (int64_t inner : {1, 7, 49, 128, 196, 225, 384, 1000, 1024, 4100, 8192}) {
        const CudaLaunchShape s = launch(k, {rows, inner});
        EXPECT_LE(s.block, 128) << rows << " x " << inner;
        EXPECT_LE(s.vectors, cudaVectorShape(k).row_unroll) << rows << " x " << inner;
      }
    }
  }
}

}  // namespace
}  // namespace fuser::codegen
