// Eager's layout (sizes and strides) of every kernel output, from the layouts of the
// kernel's inputs: each node of the kernel graph is replayed as ATen would allocate its
// result, so a group output gets the shape and strides eager gives that value, whatever
// the group's iteration shape (an output computed from some of the inputs only is
// smaller; a transposed first operand gives a transposed result; channels-last stays
// channels-last).
//
// The rules, per node:
// - elementwise ops allocate through TensorIterator: the broadcast shape; when every
//   operand has that shape and all are contiguous, or all channels-last, or all dense
//   with equal strides, that layout; otherwise the dimensions sorted by the operands'
//   strides, first operand first (a broadcast dim of an operand leaves the decision to
//   the next one). Scalar `self`/`other` arguments are operands too (ATen wraps them as
//   0-dim tensors), which only matters for that first test. On CPU an operand of another
//   dtype than the op's common one is first copied into it (a dense copy in its own dim
//   order: an expanded int64 beside a float32 reads as dense);
// - conversions (to, _to_copy, type_as, the autocast casts) keep self's strides when
//   self is dense, else the dense strides in self's dimension order
//   (memory_format=preserve); they never broadcast, and their `other` tensor is read
//   for its dtype only;
// - an in-place write made functional (fuser::masked_fill_like_self, or an op carrying
//   the like_self attribute: passes/inplace.cpp) keeps self's strides as a conversion
//   does, the write leaving them as they were (TensorIterator would call a transposed
//   [4, 1] contiguous and give it strides [1, 1]); its other operands stay operands, read
//   by the kernel as before;
// - masked_fill clones self, broadcast to the mask, contiguously; contiguous copies self
//   into row-major strides (or answers self, which already has them);
// - batch_norm allocates in its input's suggested memory format (channels-last 2-D or
//   3-D when the input's strides are, else contiguous) on CPU and where CUDA's eager
//   takes cuDNN; ATen's own CUDA kernel allocates like its input (memory_format=
//   preserve). The executor asks eager's backend choice per call (`BatchNormSite`);
// - native_dropout (eval mode) gives a clone of its input and a mask of ones, both laid
//   out like the input; CUDA's native_dropout_backward allocates in its gradient's
//   suggested memory format.
// Empty results are not replayed: their strides follow rules of ATen's own (zero
// strides, clones) that the executor leaves to eager, running such calls interpreted
// (fusion_executor.h). Where eager answers a same-dtype conversion with self itself (an alias, perhaps not
// dense): of a group input, the guard's fused branch yields that input itself
// (passes/guard.cpp); of a value the group computes, the group returns a fresh dense
// tensor with the strides above (eager's alias is dense there too).
// Nodes the caller names (a row group's reductions and normalizations) take their
// results' layouts from the caller at each run: what ATen allocates for those depends
// on sizes the caller works out (runtime/row_executor.h).
#pragma once

#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/jit/ir/ir.h>

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/tensor_view.h"

namespace fuser::runtime {

struct Layout {
  c10::SmallVector<int64_t, 6> sizes;
  c10::SmallVector<int64_t, 6> strides;
};

// Layouts of ATen's allocations, on their own (tests compare them with ATen).
Layout iteratorLayout(c10::ArrayRef<const Layout*> operands);  // null operand: a wrapped scalar
Layout preservedLayout(const Layout& self);
Layout contiguousLayout(c10::IntArrayRef sizes);
// empty_like(self, self.suggest_memory_format()): channels-last when self's strides
// are, else contiguous.
Layout suggestedFormatLayout(const Layout& self);
// Whether `l`'s elements are distinct and fill its storage (ATen's test of a result).
bool isNonOverlappingAndDense(const Layout& l);

// A batch_norm of the kernel graph: the kernel-graph input positions of x, weight, bias,
// running_mean and running_var (-1: None), and its eps; what eager's choice of backend
// reads.
struct BatchNormSite {
  std::array<int32_t, 5> inputs{};
  double eps = 0;
};

// The replay of one kernel graph, prepared once per group.
class LayoutProgram {
 public:
  using NodePredicate = std::function<bool(const torch::jit::Node*)>;
  explicit LayoutProgram(const torch::jit::Graph& kernel_graph, const NodePredicate& given = {});

  // Layouts of the graph's outputs, given the views of its tensor inputs (in graph input
  // order, scalars skipped) and, per batch-norm site, whether eager allocates its result
  // in the suggested memory format (true where `suggested_format` is shorter), and the
  // layouts of the given nodes' results (in the order of givenValues()).
  void run(c10::ArrayRef<TensorView> tensor_inputs, std::vector<Layout>& outputs,
           c10::ArrayRef<bool> suggested_format = {}, c10::ArrayRef<Layout> given = {}) const;

  // The results of the nodes named at construction, in graph order.
  const std::vector<const torch::jit::Value*>& givenValues() const { return given_values_; }

  const std::vector<BatchNormSite>& batchNorms() const { return batch_norms_; }

  // Per tensor input: whether some output's value depends on its elements. An input
  // read only for its dtype (type_as's `other`) takes no part in the iteration shape.
  const std::vector<bool>& readsElements() const { return reads_elements_; }

 private:
  enum class Rule : uint8_t {
    Iterate, Preserve, Contiguous, LikeSelf, SuggestedFormat, BatchNorm, Given
  };
  struct Step {
    Rule rule;
    c10::SmallVector<int32_t, 4> operands;  // value slots; -1 for a wrapped scalar
    int32_t result;
    int32_t index = -1;  // Rule::BatchNorm: its site; Rule::Given: its value in givenValues()
    // Rule::Iterate on CPU: per operand, whether TensorIterator first copies it into the
    // op's common dtype (dense; empty: none is)
    c10::SmallVector<bool, 4> cast_copies;
  };
  size_t num_tensor_inputs_ = 0;
  size_t num_slots_ = 0;
  std::vector<Step> steps_;
  std::vector<int32_t> output_slots_;
  std::vector<bool> reads_elements_;
  std::vector<BatchNormSite> batch_norms_;
  std::vector<const torch::jit::Value*> given_values_;
};

}  // namespace fuser::runtime
