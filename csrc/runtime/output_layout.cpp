#include "runtime/output_layout.h"
#include "value_types.h"

#include <ATen/ExpandUtils.h>
#include <c10/core/MemoryFormat.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <unordered_map>

#include "ops/batch_norm.h"
#include "ops/op_table.h"
#include "ops/type_promotion.h"
#include "symbols.h"

namespace fuser::runtime {
namespace {

using Dims = c10::SmallVector<int64_t, 6>;

bool isContiguous(const Layout& l) {
  int64_t expected = 1;
  for (size_t d = l.sizes.size(); d-- > 0;) {
    if (l.sizes[d] == 0) return true;
  }
  for (size_t d = l.sizes.size(); d-- > 0;) {
    if (l.sizes[d] == 1) continue;
    if (l.strides[d] != expected) return false;
    expected *= l.sizes[d];
  }
  return true;
}

// ATen's channels-last test for 4-D tensors (NHWC order: C, W, H, N innermost first).
bool isChannelsLast(const Layout& l) {
  if (l.sizes.size() != 4) return false;
  int64_t expected = 1;
  for (int d : {1, 3, 2, 0}) {
    if (l.sizes[d] == 1) continue;
    if (l.strides[d] != expected) return false;
    expected *= l.sizes[d];
  }
  return true;
}

Dims contiguousStrides(c10::IntArrayRef sizes) {
  Dims strides(sizes.size(), 1);
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= std::max<int64_t>(sizes[d], 1);
  }
  return strides;
}

Dims channelsLastStrides(c10::IntArrayRef sizes) {
  Dims strides(4, 1);
  int64_t stride = 1;
  for (int d : {1, 3, 2, 0}) {
    strides[d] = stride;
    stride *= std::max<int64_t>(sizes[d], 1);
  }
  return strides;
}

// Insertion sort of dimensions, innermost first, as TensorIterator's reorder_dimensions
// (and infer_dense_strides, for one tensor) do it: `compare(a, b)` > 0 moves a after b.
template <typename Compare>
Dims sortDimensions(size_t ndim, Compare compare) {
  Dims perm(ndim);
  std::iota(perm.rbegin(), perm.rend(), 0);  // innermost (ndim - 1) first
  for (size_t i = 1; i < ndim; ++i) {
    size_t dim1 = i;
    for (size_t j = i; j-- > 0;) {
      const int c = compare(perm[j], perm[dim1]);
      if (c > 0) {
        std::swap(perm[j], perm[dim1]);
        dim1 = j;
      } else if (c < 0) {
        break;
      }
    }
  }
  return perm;
}

// x, weight, bias, running_mean, running_var of a batch_norm `node` as positions among
// the graph's inputs (-1: None), and its eps (a constant: ops/batch_norm.cpp fuses no
// other).
BatchNormSite batchNormSite(const torch::jit::Graph& graph, const torch::jit::Node* node) {
  BatchNormSite site;
  for (size_t i = 0; i < site.inputs.size(); ++i) {
    const auto& inputs = graph.inputs();
    auto it = std::find(inputs.begin(), inputs.end(), node->input(i));
    site.inputs[i] = it == inputs.end() ? -1 : int32_t(it - inputs.begin());
  }
  const c10::optional<c10::IValue> eps = torch::jit::toIValue(node->input(7));
  TORCH_INTERNAL_ASSERT(eps && (eps->isDouble() || eps->isInt()),
                        "fuser: batch_norm's eps is not a constant number");
  site.eps = eps->isDouble() ? eps->toDouble() : double(eps->toInt());
  return site;
}

}  // namespace

bool isNonOverlappingAndDense(const Layout& l) {
  TensorView v;
  v.sizes = l.sizes;
  v.strides = l.strides;
  return v.isNonOverlappingAndDense();
}

Layout contiguousLayout(c10::IntArrayRef sizes) {
  Layout out;
  out.sizes.assign(sizes.begin(), sizes.end());
  out.strides = contiguousStrides(sizes);
  return out;
}

Layout suggestedFormatLayout(const Layout& self) {
  const c10::IntArrayRef sizes(self.sizes);
  const c10::IntArrayRef strides(self.strides);
  Layout out;
  out.sizes = self.sizes;
  if (sizes.size() == 4 && c10::is_channels_last_strides_2d(sizes, strides)) {
    const auto cl = c10::get_channels_last_strides_2d(sizes);
    out.strides.assign(cl.begin(), cl.end());
  } else if (sizes.size() == 5 && c10::is_channels_last_strides_3d(sizes, strides)) {
    const auto cl = c10::get_channels_last_strides_3d(sizes);
    out.strides.assign(cl.begin(), cl.end());
  } else {
    return contiguousLayout(sizes);
  }
  return out;
}

Layout iteratorLayout(c10::ArrayRef<const Layout*> operands) {
  // The broadcast shape, and whether every operand has it (a wrapped scalar does not,
  // beside a tensor of any rank).
  Dims shape;
  bool same_shape = true, has_scalars = false, has_tensors = false;
  for (const Layout* op : operands) {
    c10::IntArrayRef sizes = op ? c10::IntArrayRef(op->sizes) : c10::IntArrayRef();
    (sizes.empty() ? has_scalars : has_tensors) = true;
    if (has_scalars && has_tensors) same_shape = false;
    if (shape.empty()) {
      shape.assign(sizes.begin(), sizes.end());
    } else if (c10::IntArrayRef(shape) != sizes) {
      same_shape = false;
      auto merged = at::infer_size_dimvector(shape, sizes);
      shape.assign(merged.begin(), merged.end());
    }
  }
  Layout out;
  out.sizes = shape;
  const size_t ndim = shape.size();

  if (same_shape) {
    bool contiguous = true, channels_last = true, dense = true;
    for (const Layout* op : operands) {
      if (!op) continue;
      contiguous = contiguous && isContiguous(*op);
      channels_last = channels_last && isChannelsLast(*op);
      dense = dense && isNonOverlappingAndDense(*op);
    }
    if (contiguous) return contiguousLayout(shape);
    if (channels_last) {
      out.strides = channelsLastStrides(shape);
      return out;
    }
    if (dense) {
      const Layout* last = nullptr;
      bool equal = true;
      for (const Layout* op : operands) {
        if (!op) continue;
        if (last && last->strides != op->strides) equal = false;
        last = op;
      }
      if (equal && last) {
        out.strides = last->strides;
        return out;
      }
    }
  }
  if (ndim <= 1) return contiguousLayout(shape);

  // Each operand's strides over the broadcast shape: 0 where it is broadcast.
  std::vector<Dims> strides;
  for (const Layout* op : operands) {
    Dims s(ndim, 0);
    if (op) {
      const size_t offset = ndim - op->sizes.size();
      for (size_t d = 0; d < op->sizes.size(); ++d) {
        s[offset + d] = op->sizes[d] == 1 && shape[offset + d] != 1 ? 0 : op->strides[d];
      }
    }
    strides.push_back(std::move(s));
  }
  const Dims perm = sortDimensions(ndim, [&](int64_t dim0, int64_t dim1) {
    for (const Dims& s : strides) {
      const int64_t s0 = s[dim0], s1 = s[dim1];
      if (s0 == 0 || s1 == 0) continue;
      if (s0 < s1) return -1;
      if (s0 > s1) return 1;
      if (shape[dim0] > shape[dim1]) return 1;
    }
    return 0;
  });
  bool inverted = true;
  for (size_t j = 0; j < ndim; ++j) inverted = inverted && perm[j] == int64_t(ndim - j - 1);
  if (inverted) return contiguousLayout(shape);
  out.strides.assign(ndim, 0);
  int64_t next = 1;
  for (size_t j = 0; j < ndim; ++j) {
    out.strides[perm[j]] = next;
    next *= shape[perm[j]];
  }
  return out;
}

Layout preservedLayout(const Layout& self) {
  if (isNonOverlappingAndDense(self)) return self;
  Layout out;
  out.sizes = self.sizes;
  const size_t ndim = self.sizes.size();
  if (ndim <= 1) return contiguousLayout(self.sizes);
  const Dims perm = sortDimensions(ndim, [&](int64_t dim0, int64_t dim1) {
    const int64_t s0 = self.strides[dim0], s1 = self.strides[dim1];
    if (s0 == 0 || s1 == 0) return 0;
    if (s0 < s1) return -1;
    if (s0 > s1) return 1;
    return self.sizes[dim0] > self.sizes[dim1] ? 1 : 0;
  });
  out.strides.assign(ndim, 0);
  int64_t next = 1;
  for (size_t j = 0; j < ndim; ++j) {
    out.strides[perm[j]] = next;
    if (self.sizes[perm[j]] > 1) next *= self.sizes[perm[j]];
  }
  return out;
}

namespace {

// Per operand of an elementwise node on CPU: whether TensorIterator copies it into the
// op's common dtype before it orders the dims (promote_inputs_to_common_dtype), which
// makes an expanded or sliced operand dense: a [2, 3, 4, 5] int64 expanded along its
// last dim divided by a transposed float32 takes the copy's row-major order, not the
// float's. The common dtype is the result's, or for boolean results (comparisons,
// logical ops) the operands' promotion; where's condition is never copied. Empty where
// nothing is copied or a dtype is not known.
c10::SmallVector<bool, 4> castCopies(const torch::jit::Node* node,
                                     const std::vector<const torch::jit::Value*>& operands) {
  auto out = node->output()->type()->cast<c10::TensorType>();
  if (!out || !out->device() || !out->device()->is_cpu() || !out->scalarType()) return {};
  std::vector<ops::Operand> promoted;
  c10::SmallVector<std::optional<c10::ScalarType>, 4> dtypes;
  for (const torch::jit::Value* v : operands) {
    ops::Operand operand;
    operand.expr = 0;  // resultType counts operands that hold a number
    if (auto t = v->type()->cast<c10::TensorType>()) {
      if (!t->scalarType()) return {};
      operand.dtype = *t->scalarType();
      operand.category = t->dim() == size_t{0} ? ops::Category::ZeroDimTensor
                                               : ops::Category::DimTensor;
      dtypes.push_back(operand.dtype);
    } else {
      const c10::TypeKind k = v->type()->kind();
      if (k != c10::TypeKind::IntType && k != c10::TypeKind::FloatType &&
          k != c10::TypeKind::BoolType) {
        return {};
      }
      operand.dtype = k == c10::TypeKind::IntType     ? c10::ScalarType::Long
                      : k == c10::TypeKind::FloatType ? c10::ScalarType::Double
                                                      : c10::ScalarType::Bool;
      dtypes.push_back(std::nullopt);  // a wrapped scalar: no layout to copy
    }
    promoted.push_back(operand);
  }
  const bool where = node->kind() == c10::aten::where;
  if (where && !promoted.empty()) promoted.erase(promoted.begin());
  const c10::ScalarType common = *out->scalarType() == c10::ScalarType::Bool
                                     ? ops::resultType(promoted)
                                     : *out->scalarType();
  c10::SmallVector<bool, 4> copies(operands.size(), false);
  bool any = false;
  for (size_t o = where ? 1 : 0; o < operands.size(); ++o) {
    copies[o] = dtypes[o] && *dtypes[o] != common;
    any = any || copies[o];
  }
  return any ? copies : c10::SmallVector<bool, 4>{};
}

}  // namespace

LayoutProgram::LayoutProgram(const torch::jit::Graph& graph, const NodePredicate& given) {
  static const c10::Symbol to = c10::Symbol::fromQualString("aten::to");
  static const c10::Symbol to_copy = c10::Symbol::fromQualString("aten::_to_copy");
  static const c10::Symbol masked_fill = c10::Symbol::fromQualString("aten::masked_fill");
  static const c10::Symbol to_reduced =
      c10::Symbol::fromQualString("aten::_autocast_to_reduced_precision");
  static const c10::Symbol to_full =
      c10::Symbol::fromQualString("aten::_autocast_to_full_precision");
  std::unordered_map<const torch::jit::Value*, int32_t> slot;
  for (const torch::jit::Value* in : graph.inputs()) {
    if (in->type()->kind() == c10::TypeKind::TensorType) slot[in] = int32_t(num_slots_++);
  }
  num_tensor_inputs_ = num_slots_;
  for (const torch::jit::Node* node : graph.nodes()) {
    if (given && given(node)) {
      for (const torch::jit::Value* out : node->outputs()) {
        if (out->type()->kind() != c10::TypeKind::TensorType) continue;
        Step step{Rule::Given, {}, int32_t(num_slots_++), int32_t(given_values_.size())};
        given_values_.push_back(out);
        slot[out] = step.result;
        steps_.push_back(std::move(step));
      }
      continue;
    }
    // native_dropout: in eval mode input.clone() and ones_like(input), in training (here
    // fuser::philox_dropout) input * mask * scale and the mask, all like the input.
    const bool dropout =
        node->kind() == c10::aten::native_dropout || node->kind() == philoxDropoutSymbol();
    if (dropout && slot.count(node->input(0))) {
      for (const torch::jit::Value* out : node->outputs()) {
        Step step{Rule::Preserve, {slot[node->input(0)]}, int32_t(num_slots_++)};
        slot[out] = step.result;
        steps_.push_back(std::move(step));
      }
      continue;
    }
    if (node->kind() == c10::prim::Constant || node->outputs().size() != 1 ||
        node->output()->type()->kind() != c10::TypeKind::TensorType) {
      continue;
    }
    Step step{Rule::Iterate, {}, 0};
    const c10::FunctionSchema* schema = node->maybeSchema();
    const c10::Symbol kind = node->kind();
    if (kind == to || kind == to_copy || kind == c10::aten::type_as || kind == to_reduced ||
        kind == to_full) {
      step.rule = Rule::Preserve;
    }
    if (kind == masked_fill || kind == c10::aten::contiguous) step.rule = Rule::Contiguous;
    // An in-place write made functional keeps self's strides, as the write did.
    if (kind == maskedFillLikeSelfSymbol() || node->hasAttribute(likeSelfAttr())) {
      step.rule = Rule::LikeSelf;
    }
    // CUDA's native_dropout_backward allocates like its gradient's suggested format; the
    // CPU's multiplies through TensorIterator.
    if (kind == c10::aten::native_dropout_backward && isOnCuda(node->input(0))) {
      step.rule = Rule::SuggestedFormat;
    }
    if (ops::isBatchNorm(node)) {
      step.rule = Rule::BatchNorm;
      step.index = int32_t(batch_norms_.size());
      batch_norms_.push_back(batchNormSite(graph, node));
    }
    std::vector<const torch::jit::Value*> operand_values;  // per operand, as step.operands
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      const torch::jit::Value* in = node->input(i);
      if (auto it = slot.find(in); it != slot.end()) {
        step.operands.push_back(it->second);
        operand_values.push_back(in);
      } else if (schema && i < schema->arguments().size()) {
        // ATen wraps a Scalar self/other into a 0-dim tensor operand.
        const c10::Argument& arg = schema->arguments()[i];
        if ((arg.name() == "self" || arg.name() == "other") &&
            arg.type()->kind() == c10::TypeKind::NumberType) {
          step.operands.push_back(-1);
          operand_values.push_back(in);
        }
      }
      // Conversions read only self; their other tensor (type_as) gives the dtype.
      if (step.rule == Rule::Preserve && !step.operands.empty()) break;
    }
    // rsub(self, other) is sub(other, self): the first operand leads the layout.
    if (kind == c10::aten::rsub && step.operands.size() >= 2) {
      std::swap(step.operands[0], step.operands[1]);
      std::swap(operand_values[0], operand_values[1]);
    }
    if (step.rule == Rule::Iterate) step.cast_copies = castCopies(node, operand_values);
    // masked_fill's layout follows the broadcast of self and mask only.
    if ((kind == masked_fill || kind == maskedFillLikeSelfSymbol()) && step.operands.size() > 2) {
      step.operands.resize(2);
    }
    step.result = int32_t(num_slots_++);
    slot[node->output()] = step.result;
    steps_.push_back(std::move(step));
  }
  std::vector<bool> needed(num_slots_, false);
  for (const torch::jit::Value* out : graph.outputs()) {
    auto it = slot.find(out);
    TORCH_CHECK(it != slot.end(), "fuser: a kernel output is not a tensor the kernel computes");
    output_slots_.push_back(it->second);
    needed[it->second] = true;
  }
  for (auto step = steps_.rbegin(); step != steps_.rend(); ++step) {
    if (!needed[step->result]) continue;
    for (int32_t op : step->operands) {
      if (op >= 0) needed[op] = true;
    }
  }
  reads_elements_.assign(needed.begin(), needed.begin() + long(num_tensor_inputs_));
}

void LayoutProgram::run(c10::ArrayRef<TensorView> tensor_inputs, std::vector<Layout>& outputs,
                        c10::ArrayRef<bool> suggested_format, c10::ArrayRef<Layout> given) const {
  TORCH_INTERNAL_ASSERT(tensor_inputs.size() == num_tensor_inputs_);
  TORCH_INTERNAL_ASSERT(given.size() == given_values_.size());
  std::vector<Layout> layouts(num_slots_);
  for (size_t i = 0; i < num_tensor_inputs_; ++i) {
    layouts[i].sizes = tensor_inputs[i].sizes;
    layouts[i].strides = tensor_inputs[i].strides;
  }
  c10::SmallVector<const Layout*, 4> operands;
  c10::SmallVector<Layout, 4> copies;
  for (const Step& step : steps_) {
    copies.resize(step.cast_copies.size());
    operands.clear();
    for (int32_t op : step.operands) operands.push_back(op >= 0 ? &layouts[op] : nullptr);
    Layout& result = layouts[step.result];
    switch (step.rule) {
      case Rule::Iterate:
        // CPU: operands of another dtype than the common one, as TensorIterator copies them.
        for (size_t o = 0; o < step.cast_copies.size(); ++o) {
          if (!step.cast_copies[o] || !operands[o]) continue;
          copies[o] = preservedLayout(*operands[o]);
          operands[o] = &copies[o];
        }
        result = iteratorLayout(operands);
        break;
      case Rule::Preserve:
      case Rule::LikeSelf:  // the same layout; its other operands stay read by the kernel
        TORCH_INTERNAL_ASSERT(!operands.empty() && operands[0]);
        result = preservedLayout(*operands[0]);
        break;
      case Rule::Contiguous: result = contiguousLayout(iteratorLayout(operands).sizes); break;
      case Rule::SuggestedFormat:
        TORCH_INTERNAL_ASSERT(!operands.empty() && operands[0]);
        result = suggestedFormatLayout(*operands[0]);
        break;
      case Rule::BatchNorm: {
        TORCH_INTERNAL_ASSERT(!operands.empty() && operands[0]);
        const size_t site = size_t(step.index);
        const bool suggested = site >= suggested_format.size() || suggested_format[site];
        result = suggested ? suggestedFormatLayout(*operands[0]) : preservedLayout(*operands[0]);
        break;
      }
      case Rule::Given: result = given[size_t(step.index)]; break;
    }
  }
  outputs.clear();
  for (int32_t s : output_slots_) outputs.push_back(layouts[s]);
}

}  // namespace fuser::runtime
