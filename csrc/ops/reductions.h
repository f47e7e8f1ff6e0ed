// Reductions, normalizations and softmax over a tensor's trailing dims (group_norm: over
// a group of channels and the dims after them; the plain reductions over any dims),
// which a group computes in a row kernel (codegen/row_printer.h): one row per index of
// the kept dims, the row's elements combined by Reduce expressions, the reduced value
// broadcast back to the row's elements by whatever follows. Their op-table entries
// (reduces = true) accept a node only when its dims are constants (the normalizations':
// the input's last dims), so every reduction of a group can share the group's rows.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace fuser::ops {

struct RowReduction {
  int64_t rank = 0;     // of the reduced input
  int64_t reduced = 0;  // dims reduced over (>= 1): the trailing ones unless `dims` says
  // Plain reductions (sum, mean, amax, amin, var, std, norm) over other dims than the
  // trailing ones: every reduced dim, ascending (empty: the trailing `reduced`). The row
  // executor then takes the kept dims as rows and the reduced ones as a row's elements.
  std::vector<int64_t> dims;
  // What the node returns: one element per element of its input (softmax, layer_norm),
  // or one per row with the reduced dims kept as size 1, or dropped.
  enum class Result : uint8_t { Whole, KeepDims, DropDims } result = Result::Whole;
  // group_norm: dim 1 splits into this many groups before the row is taken (a row is
  // one group's channels and every dim after them); 0 for the others.
  int64_t groups = 0;

  // Whether dim `d` (of `rank`) is reduced.
  bool reduces(int64_t d) const;
  bool sameDims(const RowReduction& o) const {
    return rank == o.rank && reduced == o.reduced && groups == o.groups && dims == o.dims;
  }
};

// aten::layer_norm or aten::native_layer_norm (which also returns the row mean and
// rstd, with the normalized dims kept as size 1: autodiff's forward saves them).
bool isLayerNorm(const torch::jit::Node* node);
// A normalization over the trailing dims its normalized_shape (input 1) names, with an
// optional weight of those sizes (input 2): layer_norm, native_layer_norm, rms_norm.
bool isShapeNormalization(const torch::jit::Node* node);
// fuser::layer_norm_input_grad (symbols.h): (grad_out, input, normalized_shape, mean,
// rstd, weight), one element per element of grad_out.
bool isLayerNormInputGrad(const torch::jit::Node* node);
inline constexpr size_t kInputGradInput = 1;
inline constexpr size_t kInputGradMean = 3;
inline constexpr size_t kInputGradRstd = 4;
inline constexpr size_t kInputGradWeight = 5;

// group_norm's weight and bias (inputs 2 and 3), read per channel by the row executor.
inline constexpr size_t kGroupNormWeight = 2;
inline constexpr size_t kGroupNormBias = 3;
// Whether input `input` of `node` is a group_norm's weight or bias.
bool isGroupNormAffine(const torch::jit::Node* node, size_t input);

// False where `v`'s profiled layout puts the elements of a row (its trailing `reduced`
// dims) apart in memory, as a channels-last tensor's H and W are: row kernels read rows
// as runs (or a value broadcast along the row). True where the layout is unknown.
bool rowsAreRuns(const torch::jit::Value* v, int64_t reduced);

// What `node` reduces when it is a reduction of the table with constant dims and a
// profiled input rank; nullopt otherwise. softmax, log_softmax and layer_norm over rows
// that lie apart in memory (a dim other than the last, a transposed input) name their
// dims, as reductions over other dims do: the row executor then walks them as columns
// or runs, by the input's layout. Their backward ops take their trailing dims only.
std::optional<RowReduction> rowReductionOf(const torch::jit::Node* node);

// Whether `node` sums over the leading dims exactly what a row of `row` (a reduction
// over the trailing dims) keeps: a sum without a dtype, or a _grad_sum_to_size, of a
// float or 16-bit tensor of row's rank (layer_norm's weight and bias gradients beside
// its input gradient). A row kernel sums it beside its rows (runtime/row_executor.h).
bool isColumnSumBeside(const torch::jit::Node* node, const RowReduction& row);
// Whether `node` converts a value to a floating dtype (aten::to.dtype), as a column
// sum's result may be before it leaves its group (a 16-bit weight's gradient summed in
// float).
bool isFloatingConversion(const torch::jit::Node* node);
// What leaves a group for column sum `sum`: the conversion of its result where that
// conversion is the result's only reader (isFloatingConversion), else the result.
const torch::jit::Value* columnSumResult(const torch::jit::Node* sum);

// The size aten::_grad_sum_to_size sums its gradient to: its constant `size`, else its
// result's profiled sizes (the guard pins the size to them, passes/guard.cpp); nullopt
// for other nodes, a None size, or sizes unknown.
std::optional<std::vector<int64_t>> gradSumTarget(const torch::jit::Node* node);

// The normalized_shape of layer_norm, native_layer_norm or layer_norm_input_grad: its
// constant, else its weight's profiled sizes, which eager requires it to equal (the
// guard pins the list to them, passes/guard.cpp: `F.layer_norm(x, x.shape[-1:], w, b)`,
// or nanoGPT's `F.layer_norm(x, self.weight.shape, ...)`, whose backward reads the list
// as an input); nullopt for other nodes, or no weight of known sizes.
std::optional<std::vector<int64_t>> normalizedShapeOf(const torch::jit::Node* node);

// The input of `node` that is a size list the guard may pin: _grad_sum_to_size's size,
// the normalizations' normalized_shape; nullopt for other nodes.
std::optional<size_t> sizeListInput(const torch::jit::Node* node);

// The profiled sizes of the result of a reduction of `input_sizes` (complete).
std::vector<int64_t> reducedSizes(const std::vector<int64_t>& input_sizes,
                                  const RowReduction& r);

}  // namespace fuser::ops
