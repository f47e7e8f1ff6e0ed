// Prints a Kernel as CUDA C++ for NVRTC: one extern "C" __global__ function taking one
// argument struct by value. Its launch shape (cudaLaunchShape) covers the iteration
// space once, or walks rows of it in grid y.
#pragma once

#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/kernel_ir.h"

namespace fuser::codegen {

// Threads per block of most kernels (cudaBlockSize says which get more).
constexpr int kCudaBlockSize = 256;

std::string printCudaKernel(const Kernel& kernel);

// Side of the square tiles of a transpose_tile kernel with these inputs (`transposed`
// marked): a warp reads a tile's row of a transposed input along that input's fastest
// dim, then the block reads it back column-wise from shared memory while writing the
// outputs along theirs. 64 where every transposed input has 2- or 4-byte elements and
// every other one is read along the rows or broadcast along them, so that lanes take
// vectors of elements (8 or 16 bytes of a transposed input); else 32. On the H100, pairs took
// the float16 transpose of 8192 x 8192 from 176.5 us to 146.3 (floor 134.8) and the
// float32 one from 275.1 to 270.3 (floor 269.7); fours of 2-byte elements put every
// 16-bit layout row within 1.10x of its floor (pairs left bfloat16 channels-last at 1.17x).
int transposeTileSide(c10::ArrayRef<TensorInput> inputs);

// Tiles consecutive blocks take down the rows before the next column of tiles
// (Kernel::tile_group), for tiles of `side`.
int transposeTileGroup(int side);

// Resident blocks per SM a kernel asks of ptxas (Kernel::min_blocks_per_sm; 0: none).
// A tile kernel's registers are set by its one-element-per-lane path, which keeps 16
// elements of each input in flight, though its vector path runs whenever pointers and
// strides allow: unbounded, the float16 transpose's kernel took 80 registers (3 blocks
// of 256 threads per SM). On the H100 (8192 x 8192 transpose, 32x256x64x64 permute and
// channels-last, float16 / bfloat16, us), with four elements per lane: unbounded 150.0 /
// 70.9 / 77.6, 4 blocks (64 registers) 140.9 / 73.2 / 73.3, 5 blocks (48) 141.5 / 71.9 /
// 71.9; with eight (tileVectorWidth): unbounded 170.9 / 71.0 / 71.1, 4 blocks 141.3 /
// 71.0 / 71.0, 5 blocks 141.8 / 71.4 / 71.4. float32 tiles (pairs) lost up to 39% at 5
// blocks on the H100; on the H200, 2-D ones gain at 4 and 3-D ones lose (the .cpp).
int tileMinBlocksPerSm(const Kernel& kernel);

// Whether a strided elementwise kernel walks rows of 4-byte elements as 16-byte vectors
// in blocks of its own size (cuda_printer.cpp's kFloatRowBlockSize): where its math is
// heavy for the bytes it moves, or its threads could not hold four vectors per input.
// Light rows holding four, and kernels that draw random numbers, keep the others' blocks.
bool floatRowKernel(const Kernel& kernel);

// Resident blocks per SM a kernel asks of ptxas (Kernel::min_blocks_per_sm; 0: none):
// tileMinBlocksPerSm's for tile kernels; for float row kernels with much math per byte
// (kFloatRowHeavyCostPerByte) whose threads hold few vectors, as many as an SM holds,
// which keeps them in 32 registers (GPUs holding fewer threads per SM ignore the cap).
int minBlocksPerSm(const Kernel& kernel);

// Shared memory a transpose_tile kernel declares for one transposed input of `dtype`.
int64_t transposeTileBytes(c10::ScalarType dtype, int side);

// The argument struct as 8-byte slots, in the order the printed struct declares them:
// input pointers, output pointers, then (strided kernels) the ndim sizes and ndim
// strides of each Strided input that has its own (same_strides_as < 0) and of each
// Strided output, the Double scalars, the Int64/Bool scalars, numel,
// and the launch's vectors per thread (CudaLaunchShape::vectors).
// Inline room for a cell's kernel (a few dozen slots): packing allocates nothing.
using CudaArgSlots = c10::SmallVector<uint64_t, 64>;

// Built once per kernel (when it is loaded), so a launch only copies values.
class CudaArgLayout {
 public:
  explicit CudaArgLayout(const Kernel& kernel);
  CudaArgSlots pack(void* const* ptrs, const int64_t* sizes, const int64_t* strides,
                    const double* dargs, const int64_t* iargs, int64_t numel, int vectors) const;

 private:
  size_t num_pointers_;
  int ndim_;
  std::vector<int> stride_rows_;  // launch tensors whose strides FxArgs holds, in order
  int num_doubles_ = 0;
  int num_ints_ = 0;
};

// Elements per vector access of a flat kernel: 16 bytes of its widest tensor.
int cudaVectorWidth(const Kernel& kernel);

// Most threads per block a kernel is printed for (its __launch_bounds__) and launched
// with: kCudaBlockSize, 1024 for flat kernels moving one 16-byte vector per tensor
// and thread (few enough tensors that 64 registers hold their vectors, and not bound by
// their math), 128 for float row kernels (floatRowKernel).
int cudaBlockSize(const Kernel& kernel);

// What a launch needs to know of a kernel's vector paths and blocks; fixed per kernel,
// so the runtime computes it once when the kernel is loaded.
struct CudaVectorShape {
  int flat_width;  // cudaVectorWidth
  int row_width;   // elements per vector access on the row path; 1: rows go element-wise
  int row_unroll;  // most vectors per thread and tile the row path was printed for
  int block;       // cudaBlockSize
  // Rows may be walked as flat vectors crossing rows (straddlingRowVectors), and some
  // input is then loaded lane by lane (readsRowsInLanes).
  bool straddling = false;
  bool lane_loads = false;
};
CudaVectorShape cudaVectorShape(const Kernel& kernel);

// Grid, block and vectors per thread for one launch. Flat and strided per-element
// kernels get a grid that covers the work once (one vector or element per thread; on
// the H100 this beat a grid-stride loop over a few resident blocks per SM by 3-5%).
// Row kernels get a block per tile of a row in x and walk the rows in y; they move up to
// row_unroll vectors per thread and tile (two for halves and floatRowKernel's rows, four
// for other float rows and 8-byte elements) as the row holds them, and
// single elements when vectors would leave too few threads per SM; half precision and
// element-wise rows are capped at 64 blocks per SM, each then walking several rows.
// Blocks have cudaBlockSize threads, and shrink (to 64 at least) when the work would
// not give each of `sm_count` SMs a block.
struct CudaLaunchShape {
  int64_t grid_x;  // row kernels: the tiles of a row
  int64_t grid_y;  // row kernels: blocks walking the rows (1 for other kernels)
  int block;
  int vectors;  // vectors per thread and tile or iteration; 0: one element per thread
};
CudaLaunchShape cudaLaunchShape(const Kernel& kernel, const CudaVectorShape& vectors,
                                const int64_t* sizes, int64_t numel, int sm_count);

}  // namespace fuser::codegen
