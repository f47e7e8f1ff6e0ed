// Runs one fuser::FusionGroup node: per call, plans the iteration space, finds the
// kernel specialized for the inputs' dtypes and layout (compiling it at first sight),
// allocates the outputs and launches. A group whose kernel cannot be built runs its
// subgraph through the TorchScript interpreter instead (one warning).
#pragma once

#include <ATen/core/stack.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/interpreter.h>

#include <memory>
#include <mutex>
#include <vector>

#include "codegen/kernel_ir.h"
#include "runtime/compiled_kernel.h"
#include "runtime/iteration_plan.h"
#include "runtime/kernel_graph.h"
#include "runtime/tensor_view.h"

namespace fuser::runtime {

// What a kernel is specialized on: device, rank class and each input's dtype and
// access pattern. Never sizes.
using SpecKey = c10::SmallVector<uint8_t, 48>;

class FusionExecutor {
 public:
  explicit FusionExecutor(const torch::jit::Node* node);
  void run(torch::jit::Stack& stack);

 private:
  struct Specialization {
    SpecKey key;
    std::vector<c10::ScalarType> out_dtypes;
    std::shared_ptr<CompiledKernel> kernel;  // null: could not be built
  };

  const Specialization& specialize(const SpecKey& key, const IterationPlan& plan,
                                   c10::ArrayRef<TensorView> tensors, c10::Device device,
                                   bool vectorize);
  void runInterpreted(torch::jit::Stack& stack);

  std::shared_ptr<torch::jit::Graph> subgraph_;  // what the interpreter runs
  KernelGraph kernel_graph_;                     // what the kernel computes
  size_t num_inputs_;
  size_t num_outputs_;                           // of the group; the kernel may have more
  bool writes_cat_ = false;                      // some kernel outputs are cat slices
  std::vector<codegen::ScalarArgKind> scalar_kinds_;  // per kernel input; tensors ignored
  std::vector<bool> is_tensor_;                       // per kernel input

  std::mutex mutex_;
  std::vector<std::unique_ptr<Specialization>> specializations_;
  std::once_flag interpreter_once_;
  std::unique_ptr<torch::jit::Code> interpreter_code_;
  bool warned_ = false;
};

}  // namespace fuser::runtime
