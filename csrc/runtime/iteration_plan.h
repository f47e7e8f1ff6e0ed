// The iteration space of one group call: its shape (the broadcast of the inputs), the
// order its dimensions are walked in (the lead output's layout, so that output is
// written in memory order), and for each tensor how the kernel addresses it after
// dimensions that iterate together are collapsed. Recomputed per call, so never
// specialized on sizes.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include <vector>

#include "codegen/kernel_ir.h"
#include "runtime/tensor_view.h"

namespace fuser::runtime {

struct IterationPlan {
  std::vector<int64_t> out_sizes;    // the broadcast shape, in its own dimension order
  int64_t numel = 0;
  int ndim = 1;                      // collapsed iteration rank
  c10::SmallVector<int64_t, 8> sizes;    // collapsed sizes, outermost first
  c10::SmallVector<int64_t, 32> strides;  // per tensor input, ndim strides each
  c10::SmallVector<codegen::TensorInput, 8> inputs;  // access class per tensor input
  bool flat = true;     // every input is Flat or Broadcast1
  bool index32 = true;  // every offset fits in int32 (CUDA index math)
  int transpose_tile = 0;  // codegen::Kernel::transpose_tile (chooseTransposeTiles)
  // Per tensor input: the first chunk of the same tensor, and how many elements on this
  // input's data starts (CUDA; codegen::FixedShape::pointer_base). Empty elsewhere.
  c10::SmallVector<int32_t, 24> pointer_base;
  c10::SmallVector<int64_t, 24> pointer_delta;
};

// The shape the tensors broadcast to. Throws c10::Error (with eager's wording) when the
// shapes do not broadcast.
std::vector<int64_t> broadcastShape(c10::ArrayRef<TensorView> tensors);

// Walks the dimensions outermost first in the order of `lead_strides` (largest stride
// first; row-major when empty). Throws c10::Error (with eager's wording) when the shapes
// do not broadcast.
IterationPlan planIteration(c10::ArrayRef<TensorView> tensors,
                            c10::IntArrayRef lead_strides = {});

// Walks the two innermost dims in tiles (codegen::Kernel::transpose_tile) when some
// input among the first `count` steps by 1 along dim ndim-2 but not along ndim-1 and
// both dims are long enough to fill a tile; marks those inputs `transposed`. The side
// is `side` when given, else codegen::transposeTileSide of those inputs.
void chooseTransposeTiles(IterationPlan& plan, size_t count, int side = 0);

// Marks each Strided tensor among the first `count` whose strides equal an earlier
// one's (TensorInput::same_strides_as), so a CUDA kernel computes their offsets once:
// the chunks of an LSTM's gate matrices all step alike.
void shareEqualStrides(IterationPlan& plan, size_t count);

}  // namespace fuser::runtime
