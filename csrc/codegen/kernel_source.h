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

// All tensor inputs are taken as Flat (or Strided when `flat` is false).
std::string printKernelSource(const torch::jit::Graph& subgraph, std::vector<InputDesc> inputs,
                              Dialect dialect, bool flat);

}  // namespace fuser::codegen
