// Runs one fuser::FusionGroup node: per call, works out each output's eager layout
// (output_layout.h), plans the iteration space in the first output's memory order,
// finds the kernel specialized for the inputs' dtypes and layout (compiling it at first
// sight), allocates the outputs and launches. Outputs laid out otherwise than the first
// are written through their strides; a call whose outputs would not all have the
// iteration shape (the partition keeps profiled shapes equal; sizes seen later may
// differ) runs the subgraph through the interpreter, which gives eager's shapes. On CUDA, strided kernels are also specialized on
// the shape, for the first config().shape_kernels shapes a group meets: sizes, strides
// and chunk offsets become constants (an LSTM cell's kernel, B256 H1024 fp32, went from
// 4.37 to 3.55 us on the H100); later shapes share a kernel that reads them from its
// arguments, so compiles per group stay bounded. A call whose inputs repeat the last
// call's layout skips the planning. A group whose kernel cannot be built runs its
// subgraph through the TorchScript interpreter instead (one warning); so does a call
// over an empty iteration space, which has nothing to compute and whose results take
// the strides ATen gives empty tensors.
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
#include "runtime/interpreted_group.h"
#include "runtime/iteration_plan.h"
#include "runtime/kernel_graph.h"
#include "runtime/masks_drawn_by_aten.h"
#include "runtime/output_layout.h"
#include "runtime/tensor_view.h"

namespace fuser::runtime {

// What a kernel is specialized on: device, rank class and each input's dtype and
// access pattern. Sizes only through Specialization::shape.
using SpecKey = c10::SmallVector<uint8_t, 96>;

class FusionExecutor {
 public:
  explicit FusionExecutor(const torch::jit::Node* node);
  void run(torch::jit::Stack& stack);

 private:
  struct Specialization {
    SpecKey key;
    codegen::FixedShape shape;  // empty: any shape
    std::vector<c10::ScalarType> out_dtypes;
    std::shared_ptr<CompiledKernel> kernel;  // null: could not be built
  };

  // What identifies a call's inputs for reusing the last call's preparation: per group
  // input, its dtype, device, rank and data alignment, sizes and strides (-1 for a
  // non-tensor); and the inputs' data pointers.
  struct InputSignature {
    c10::SmallVector<int64_t, 64> key;
    c10::SmallVector<char*, 8> data;
  };
  // The last full call's work, valid for every call with its signature: where each
  // kernel input lies (group input, byte offset from its data), the plan, the kernel.
  struct Prepared {
    c10::SmallVector<int64_t, 64> signature;
    c10::SmallVector<std::pair<int32_t, int64_t>, 24> views;
    std::vector<Layout> out_layouts;  // per kernel output
    IterationPlan plan;
    const Specialization* spec = nullptr;
    c10::Device device{c10::kCPU};
  };

  // False when a tensor input is undefined (the full path handles it).
  bool signatureOf(c10::ArrayRef<c10::IValue> inputs, InputSignature& signature) const;
  void runPrepared(const Prepared& prepared, const InputSignature& signature,
                   c10::ArrayRef<c10::IValue> inputs, torch::jit::Stack& stack);
  void gatherScalars(c10::ArrayRef<c10::IValue> inputs, c10::SmallVector<double, 8>& dargs,
                     c10::SmallVector<int64_t, 8>& iargs) const;
  void launch(const Specialization& spec, const IterationPlan& plan, c10::ArrayRef<void*> ptrs,
              c10::ArrayRef<double> dargs, c10::ArrayRef<int64_t> iargs, size_t num_tensors,
              c10::Device device) const;
  // What a kernel is compiled for, besides the plan: per kernel input whether it is a
  // 0-dim tensor (type promotion), per kernel output its launch tensor (-1: written in
  // iteration order).
  struct KernelShape {
    c10::ArrayRef<TensorView> tensors;  // kernel inputs, as planned
    c10::ArrayRef<bool> zero_dim;
    c10::ArrayRef<int32_t> out_slots;
  };
  const Specialization& specialize(const SpecKey& key, const IterationPlan& plan,
                                   const KernelShape& shape, c10::Device device, bool vectorize);
  // Builds and records a specialization; the caller holds mutex_.
  const Specialization& compile(const SpecKey& key, const IterationPlan& plan,
                                const KernelShape& shape, c10::Device device, bool vectorize,
                                bool fix_shape);
  // `why`: what kept the kernel from the call, for FUSER_DUMP=interpreted.
  void runInterpreted(torch::jit::Stack& stack, const char* why);

  std::shared_ptr<torch::jit::Graph> subgraph_;  // what the interpreter runs
  KernelGraph kernel_graph_;                     // what the kernel computes
  LayoutProgram layouts_;                        // eager's layout of each kernel output
  size_t num_inputs_;
  size_t num_outputs_;                           // of the group; the kernel may have more
  bool writes_cat_ = false;                      // some kernel outputs are cat slices
  // Draws random numbers: CUDA kernels then walk no transpose tiles, whose lanes have no
  // element index (codegen/philox.h).
  bool draws_random_ = false;
  // The group only copies these inputs row-major (passes/strided_copies.h).
  std::vector<size_t> copied_inputs_;
  std::vector<codegen::ScalarArgKind> scalar_kinds_;  // per kernel input; tensors ignored
  std::vector<bool> is_tensor_;                       // per kernel input

  std::mutex mutex_;
  std::vector<std::unique_ptr<Specialization>> specializations_;
  int shape_kernels_ = 0;  // specializations with a fixed shape
  std::mutex prepared_mutex_;
  std::shared_ptr<const Prepared> prepared_;  // the last full call's, when repeatable
  InterpretedGroup interpreted_;
  // Inputs read as a random dropout's offset (runtime/masks_drawn_by_aten.h).
  std::vector<size_t> philox_offsets_;
  bool warned_ = false;
};

}  // namespace fuser::runtime
