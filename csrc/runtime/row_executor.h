// Runs a fuser::FusionGroup whose subgraph reduces (ops/reductions.h) through one row
// kernel (codegen/row_printer.h): rows are the kept dims of the iteration shape (the
// shape the reductions read), a row's elements the reduced ones (the trailing dims, or
// any: plain reductions over leading dims walk rows whose elements are strided, and
// where the innermost dim is kept, CUDA gives each row one thread so that a warp reads
// neighbouring rows together: Kernel::columns). Rows too few to fill
// the machine are cut in slices and run as one kernel per stage (codegen/split_rows.h),
// their partial results in one workspace per call (runtime/workspace_plan.h). Each call works out
// every value's shape from the inputs' sizes; a call the row kernel cannot serve as
// eager would runs the subgraph through the TorchScript interpreter instead, which gives
// eager's results and errors: inputs that are not contiguous (eager's outputs might not
// be; permuted inputs of reductions over other dims whose rows stay neighbours, or are
// runs, in memory are read in place, their per-row outputs contiguous as eager's), no
// input of the iteration shape, outputs of other shapes, empty tensors, and layer_norm
// shapes and weights of the wrong size. A call whose inputs repeat the last
// call's sizes, strides, dtypes and alignment reuses its plan (or goes straight to the
// interpreter).
#pragma once

#include <ATen/core/stack.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/interpreter.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/kernel_ir.h"
#include "codegen/row_printer.h"
#include "ops/reductions.h"
#include "runtime/compiled_kernel.h"
#include "codegen/split_rows.h"
#include "runtime/interpreted_group.h"
#include "runtime/masks_drawn_by_aten.h"
#include "runtime/output_layout.h"
#include "runtime/workspace_plan.h"

namespace fuser::runtime {

class RowExecutor {
 public:
  explicit RowExecutor(const torch::jit::Node* node);
  void run(torch::jit::Stack& stack);

  // Whether a group's subgraph holds a reduction (and so runs here).
  static bool reduces(const torch::jit::Graph& subgraph);

 private:
  // Everything a call needs besides the inputs' data: valid for every call whose inputs
  // have the same dtypes, devices, sizes and strides.
  struct Plan {
    c10::SmallVector<int64_t, 32> signature;
    c10::SmallVector<int64_t, 8> sizes;     // outer dims, then the row's dims
    c10::SmallVector<int64_t, 32> strides;  // per tensor input (and strided output), same dims
    int64_t rows = 0;
    // CPU: rows per unit of a task's range (LaunchArgs::align): 64 where an output's
    // rows are stored apart, its neighbouring rows' elements sharing cache lines.
    int64_t task_align = 1;
    int64_t row_size = 0;
    std::vector<std::vector<int64_t>> out_sizes;
    // Contiguous, or eager's layout of each output where inputs are permuted views
    // (then `strides` holds the outputs' after the inputs': Kernel::strided_outputs).
    std::vector<std::vector<int64_t>> out_strides;
    std::vector<c10::ScalarType> out_dtypes;
    const char* refusal = nullptr;  // a plan of no variant: why (FUSER_DUMP=interpreted)
    // Per output that is a column sum: the whole operand's sizes and strides, as the
    // kernel writes it where it keeps no partials (empty for the other outputs).
    std::vector<std::vector<int64_t>> operand_sizes;
    std::vector<std::vector<int64_t>> operand_strides;
    std::vector<c10::ScalarType> operand_dtypes;
    c10::Device device{c10::kCPU};
    // The candidates (runtime/variant_timing.h): the first call of the plan times them
    // and sets `chosen` to the fastest. None: such calls run interpreted.
    struct Variant {
      std::shared_ptr<CompiledKernel> kernel;  // whole rows
      int64_t grain = 1;                       // CPU: rows per task
      // Rows cut in `splits` slices: the stage kernels, and where their buffers lie.
      std::vector<std::shared_ptr<CompiledKernel>> stages;
      int64_t splits = 1;
      bool last_stage_per_row = false;  // codegen::lastStagePerRow: one unit per row
      int64_t units_per_slice = 0;  // rows; CUDA columns: threads (codegen::cudaColumnThreads)
      int64_t last_stage_units = 0;  // the last stage's units where it runs one per row
      WorkspacePlan workspace;
      std::string name;
      // Column sums: rows of partial sums the kernel stores (one per block); 0: it
      // writes each column sum's operand whole.
      int64_t partial_rows = 0;
    };
    std::vector<Variant> variants;
    size_t chosen = 0;
    std::string variant_key;
  };
  struct Specialization {
    c10::SmallVector<uint8_t, 32> key;
    std::shared_ptr<CompiledKernel> kernel;  // null: could not be built
    std::vector<std::shared_ptr<CompiledKernel>> stages;  // rows cut in slices
    std::vector<codegen::SplitBuffer> buffers;            // ... and their buffers
    std::vector<c10::ScalarType> out_dtypes;
    bool column_partials = false;  // codegen::hasColumnPartials(kernel)
    bool last_stage_per_row = false;  // codegen::lastStagePerRow of the last stage
  };

  // The plan for these inputs, or nullptr when the interpreter must run such calls.
  std::shared_ptr<Plan> plan(c10::ArrayRef<c10::IValue> inputs,
                             c10::SmallVector<int64_t, 32> signature);
  // Picks the plan's variant on this call's arguments (outputs included).
  // False where the variants could not be timed now (a CUDA graph being captured): the
  // heuristic's stays chosen for this call.
  bool chooseVariantOf(Plan& p, const LaunchArgs& args, const std::vector<at::Tensor>& outputs) const;
  // Runs one variant into `outputs`, column sums included.
  void launchVariant(const Plan& p, const Plan::Variant& v, LaunchArgs args,
                     const std::vector<at::Tensor>& outputs) const;
  // Its kernel, or its stages over a fresh workspace.
  void launchKernels(const Plan& p, const Plan::Variant& v, LaunchArgs args) const;
  // `staged`: the kernels of rows cut in slices, one per stage.
  const Specialization& specialize(const c10::SmallVector<uint8_t, 32>& key,
                                   const std::vector<codegen::TensorInput>& accesses,
                                   const std::vector<bool>& zero_dim,
                                   const std::vector<bool>& per_row,
                                   const std::vector<bool>& rows_apart, int outer_ndim,
                                   int inner_ndim, const codegen::CudaRowShape& row_shape,
                                   const std::vector<codegen::CudaRowShape>& cross_shapes,
                                   c10::Device device, bool staged, bool strided_outputs);
  // Eager's layout of each output (into `p.out_strides`) where some input is neither
  // contiguous nor read only by a normalization (a transposed activation): the group's
  // profiled output types, which eager gave these very input layouts, where every tensor
  // input has its profiled sizes and strides (the guard checks neither). False elsewhere
  // (such calls run interpreted), for group_norm and reductions over other dims than the
  // trailing ones, and for random dropout (kernel and interpreter draw alike only in
  // one element order).
  bool drawsRandomDropout() const;
  bool stridedOutputs(const std::vector<at::Tensor>& tensors, const std::vector<size_t>& params,
                      Plan& p) const;
  // Eager's layout of each output (the layout program's replay, the reductions' and
  // normalizations' results contiguous), into `p.out_strides`. Where the kernel writes
  // every output row-major (no input strided) it can differ from that only in the
  // strides of size-1 dims; false (run interpreted) where it orders other dims
  // otherwise. `through_strides`: the kernel stores every output through its own
  // strides (whole outputs beside reductions over other dims than the trailing ones),
  // so any layout that is dense and does not overlap holds.
  bool eagerOutputLayouts(const std::vector<at::Tensor>& tensors,
                          const std::unordered_map<const torch::jit::Value*,
                                                   std::vector<int64_t>>& shapes,
                          Plan& p, bool through_strides) const;
  // `why`: what kept the kernel from the call, for FUSER_DUMP=interpreted.
  void runInterpreted(torch::jit::Stack& stack, const char* why);
  // Leading-dims sums of what the rows walk (ops::isColumnSumBeside) that only the
  // group returns: the kernel's subgraph returns their operands instead, which the
  // kernel sums over its rows (partials) or writes whole, and ATen's sum finishes.
  void takeColumnSumsOut();
  // The partial sums (CUDA rows held: `partials`, [sums, blocks, row]), or whole
  // operands (`buffers`), of the column sums summed into their outputs.
  void finishColumnSums(const Plan& p, const Plan::Variant& v,
                        const std::vector<at::Tensor>& buffers, const at::Tensor& partials,
                        const std::vector<at::Tensor>& outputs) const;
  // The group's reduction returning `result`.
  ops::RowReduction groupReduction(ops::RowReduction::Result result) const;

  // The group's subgraph, its column sums taken out (takeColumnSumsOut); the
  // interpreter runs the group's own.
  std::shared_ptr<torch::jit::Graph> subgraph_;
  // Per group output: what its column sum reduces (nullopt: the kernel writes it).
  std::vector<std::optional<ops::RowReduction>> column_sums_;
  // ... and, where the group returns a conversion of the sum, the conversion's dtype
  // (Undefined: the sum's own, its operand's).
  std::vector<c10::ScalarType> column_dtypes_;
  // ... and a _grad_sum_to_size's size, which the sum must give (eager raises otherwise).
  std::vector<std::optional<std::vector<int64_t>>> column_targets_;
  std::string subgraph_text_;  // part of every variant key
  size_t num_inputs_;
  size_t num_outputs_;
  std::vector<bool> is_tensor_;  // per group input
  std::vector<codegen::ScalarArgKind> scalar_kinds_;  // per group input; tensors ignored
  int num_int_args_ = 0;  // integer and bool scalars among the inputs
  // Per subgraph node, what it reduces (nullopt: elementwise or a constant).
  std::vector<std::optional<ops::RowReduction>> reductions_;
  int64_t rank_ = 0;     // of the iteration shape
  int64_t reduced_ = 0;  // dims a row spans: the trailing ones, unless reduced_dims_
  std::vector<int64_t> reduced_dims_;  // the plain reductions' dims, when not trailing
  int64_t groups_ = 0;   // group_norm: dim 1 splits into these groups (0: no split)
  std::vector<bool> channel_tensors_;  // per group input: group_norm's weight or bias
  // Per group input: read only as the input of layer_norm, rms_norm, softmax or
  // log_softmax; read so at all (and maybe by other ops too).
  std::vector<bool> normalized_only_;
  std::vector<bool> normalized_;
  bool runnable_ = true;  // one rank and one row for every reduction
  // Eager's layout of each output, the row ops' results given (none where the
  // subgraph has an output the program cannot follow).
  std::optional<LayoutProgram> layouts_;

  std::mutex mutex_;
  std::vector<std::unique_ptr<Specialization>> specializations_;
  std::mutex last_mutex_;
  std::shared_ptr<const Plan> last_;
  InterpretedGroup interpreted_;
  // Inputs read as a random dropout's offset (runtime/masks_drawn_by_aten.h).
  std::vector<size_t> philox_offsets_;
  bool warned_ = false;
};

// CUDA columns in shared memory (codegen::Kernel::columns_in_shared) for `bytes` of
// copies a block on device `device_index`: the blocks the variant asks each
// multiprocessor to hold (codegen::Kernel::column_blocks), or 0 where it does not suit
// the device (before sm_80, no cp.async; copies that a block, beside the kernel's static
// arrays, or two blocks on a multiprocessor, could not take). 4 blocks where the kernel
// stores through tiles and four fit, else 2 (BL.2 of the notes: LayerNorm2d over
// [32, 256, 64, 64] float32 took 109.1 us at 4 blocks, 125.7 at 2; a LayerNorm or softmax
// without tiles 109.5 and 128.5 at 2, 116.9 and 141.8 at 4).
int cudaColumnsInSharedBlocks(int device_index, int64_t bytes, bool tiles);

}  // namespace fuser::runtime
