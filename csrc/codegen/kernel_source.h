// Kernel source for a subgraph and input dtypes, with no tensors and no device: how
// the tests compile every op's CUDA kernel on machines without a GPU.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <string>
#include <vector>

#include "codegen/expr_printer.h"
#include "codegen/lowering.h"

namespace fuser::codegen {

enum class Dialect { Cpp, Cuda };

// How the tensor inputs are addressed: all Flat; all Strided (any strides); Strided
// with a dense innermost dimension (the row paths); the first tensor so and the
// others broadcast along it (a bias added to rows); or rows that all step like the
// first (chunks of one tensor), sharing its offsets; or, compiled for one shape with
// sizes, strides and pointer offsets as constants, 5 rows of 300 of tensors that are
// the chunks of one (5, 300 x tensors) tensor, tensor t starting 300 x t elements on;
// or in transpose tiles, every tensor after the first transposed against it, of the side
// transposeTileSide gives (Tiles) or of 64 (Tiles64); or the first tensor dense over the
// whole iteration space (Flat) and the others broadcast along its rows (FlatBroadcastRows:
// a squeeze-excite gate, whose rows may be walked as flat vectors).
enum class SourceLayout {
  Flat,
  Strided,
  Rows,
  BroadcastRows,
  FlatBroadcastRows,
  SharedRows,
  FixedRows,
  Tiles,
  Tiles64
};

std::string printKernelSource(const torch::jit::Graph& subgraph, std::vector<InputDesc> inputs,
                              Dialect dialect, SourceLayout layout);

}  // namespace fuser::codegen
