// Node kinds the fuser adds to TorchScript graphs.
#pragma once

#include <ATen/core/interned_strings.h>

namespace fuser {

// A fused region: attribute `Subgraph`; inputs are tensors and non-constant scalars,
// outputs are tensors.
inline c10::Symbol fusionGroupSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::FusionGroup");
  return s;
}

// %ok = fuser::TypeGuard[types=[...], ints=[...]](tensors..., ints...): true when every
// tensor matches the dtype, device, rank and requires_grad its group's kernels were
// specialized on, and every int (a dtype the group reads as a constant) its value.
inline c10::Symbol typeGuardSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::TypeGuard");
  return s;
}

// fuser::philox_state(Device device, float p) -> (int seed, int offset): a Philox state
// drawn from torch's generator of `device` per call (runtime/philox_ops.cpp), for the
// random dropout of the group after it; raises as eager's dropout does for p outside
// [0, 1].
inline c10::Symbol philoxStateSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::philox_state");
  return s;
}

// fuser::philox_dropout(Tensor input, float p, int seed, int offset, bool
// scale_in_input_dtype) -> (Tensor, Tensor): native_dropout in training with the mask
// drawn from that state (ops/dropout.h).
inline c10::Symbol philoxDropoutSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::philox_dropout");
  return s;
}

// fuser::restore_layout(Tensor(a) self, Tensor reference) -> Tensor(a): self in the
// memory format `reference` suggests (channels-last or row-major), as eager lays out
// the values computed from it (passes/channels_last.cpp; runtime/restore_layout_op.cpp).
inline c10::Symbol restoreLayoutSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::restore_layout");
  return s;
}

// On an op made functional from an in-place write (passes/inplace.cpp): its result keeps
// self's strides, as the write did, where the functional form's TensorIterator layout
// could differ (the stride of a size-1 dimension; runtime/output_layout.h: LikeSelf).
inline c10::Symbol likeSelfAttr() {
  static const c10::Symbol s = c10::Symbol::attr("like_self");
  return s;
}

// fuser::masked_fill_like_self(Tensor self, Tensor mask, Scalar|Tensor value) -> Tensor:
// what `self.masked_fill_(mask, value)` leaves in self, as a new tensor with self's
// strides. ATen's functional masked_fill clones self row-major, so the in-place op made
// functional (passes/inplace.cpp) takes this form (runtime/masked_fill_like_self_op.cpp).
inline c10::Symbol maskedFillLikeSelfSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::masked_fill_like_self");
  return s;
}

// fuser::fill_with_scalar_(Tensor(a!) self, Scalar value) -> Tensor(a!): self filled with
// what `aten::tensor(value, dtype=self.dtype)` holds, the write TorchScript makes of
// `x[i:j] = 3` (a host tensor copied in) without the copy: on CUDA that copy synchronizes
// the stream (passes/scalar_writes.cpp; runtime/fill_with_scalar_op.cpp).
inline c10::Symbol fillWithScalarSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::fill_with_scalar_");
  return s;
}

// fuser::pad_unless_zero(Tensor(a) self, int[] pad, str mode, float? value) -> Tensor(a)
// (and .nd, constant_pad_nd's arguments): a constant pad, but self itself where every pad
// is zero and self's elements are dense (passes/zero_pads.cpp; runtime/zero_pad_op.cpp).
inline c10::Symbol padUnlessZeroSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::pad_unless_zero");
  return s;
}

// fuser::size_at(int[] sizes, int dim) -> int: sizes[dim] with aten::size.int's wrapping
// and errors (passes/operand_sizes.cpp; runtime/size_at_op.cpp).
inline c10::Symbol sizeAtSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::size_at");
  return s;
}

// fuser::Relayout(Tensor(a) self, ...) -> Tensor(a): attribute `Subgraph`, a chain of ops
// that only move the elements of `self` (views, copies, rolls), reading numbers besides.
// Copies the elements to their places in one kernel, found once per sizes, strides and
// numbers by running the chain on their offsets (passes/relayouts.cpp;
// runtime/relayout_op.cpp).
inline c10::Symbol relayoutSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::Relayout");
  return s;
}

// fuser::PerShapeValues(keys...) -> (values...): attribute `Subgraph`, a piece of the graph
// that builds tensors from numbers, constants and the metadata of tensors it reads no
// data of (the keys). Runs it once per distinct keys and hands back the same values
// after (passes/per_shape_values.cpp; runtime/per_shape_values_op.cpp).
inline c10::Symbol perShapeValuesSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::PerShapeValues");
  return s;
}

// Set (1) on a fuser::PerShapeValues node whose piece makes or reads CUDA tensors: the
// current CUDA device and stream join its key, and nothing is kept during a capture.
inline c10::Symbol perShapeValuesCudaAttr() {
  static const c10::Symbol s = c10::Symbol::attr("cuda");
  return s;
}

// fuser::dense_attention_mask(Tensor(a) mask) -> Tensor(a): the mask, copied row-major
// where it is a CUDA tensor whose last dim has another stride than 1 (CUDA's fused
// attention kernels refuse it); itself otherwise (passes/attention_masks.cpp;
// runtime/dense_attention_mask_op.cpp).
inline c10::Symbol denseAttentionMaskSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::dense_attention_mask");
  return s;
}

// fuser::additive_attention_mask(Tensor(a) mask, Tensor query, Tensor key, Tensor value,
// float dropout_p, bool is_causal, float? scale, bool enable_gqa) -> (Tensor(a), int): a
// boolean mask as the additive mask attention with these arguments (the first layer's)
// would make of it (0 where true, where false -inf for flash and memory-efficient
// attention, cuDNN's finite value for cuDNN), and that form; any other mask, or one whose
// backend keeps it boolean, as it is (form 0). Computed once per call for every layer that
// reads the mask (passes/attention_masks_once.cpp; runtime/attention_mask_once_ops.cpp).
inline c10::Symbol additiveAttentionMaskSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::additive_attention_mask");
  return s;
}

// fuser::scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor?
// attn_mask, Tensor? additive_mask, int additive_form, float dropout_p, bool is_causal,
// float? scale, bool enable_gqa) -> Tensor: aten::scaled_dot_product_attention of
// `attn_mask`, handed `additive_mask` in its place where that is what attention would
// convert it to (passes/attention_masks_once.cpp; runtime/attention_mask_once_ops.cpp).
inline c10::Symbol attentionWithAdditiveMaskSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::scaled_dot_product_attention");
  return s;
}

// fuser::max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2]
// padding=0, int[2] dilation=1, bool ceil_mode=False) -> Tensor: aten::max_pool2d, by a
// kernel of ours on channels-last CUDA tensors (passes/max_pool_kernel.cpp;
// runtime/max_pool_op.cpp).
inline c10::Symbol maxPoolSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::max_pool2d");
  return s;
}

// fuser::layer_norm_input_grad(Tensor grad_out, Tensor input, int[] normalized_shape,
// Tensor mean, Tensor rstd, Tensor? weight) -> Tensor: native_layer_norm_backward's
// input gradient alone (passes/layer_norm_backward.cpp), a row reduction groups fuse.
inline c10::Symbol layerNormInputGradSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::layer_norm_input_grad");
  return s;
}

// fuser::batch_norm_batch_stats(Tensor row_mean, Tensor row_var, Tensor input,
// Tensor(a!) running_mean, Tensor(b!) running_var, float momentum, float eps) ->
// (Tensor mean, Tensor var): batch_norm's batch statistics per channel from its rows'
// (passes/batch_norm_training.cpp), the running statistics updated in place. The
// _for_backward form also returns the inverse standard deviation and an empty reserve,
// as autodiff's backward reads them; fuser::batch_norm_eval_saves(Tensor running_mean)
// gives eval mode's empty ones.
inline c10::Symbol batchNormBatchStatsSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::batch_norm_batch_stats");
  return s;
}
inline c10::Symbol batchNormBatchStatsForBackwardSymbol() {
  static const c10::Symbol s =
      c10::Symbol::fromQualString("fuser::batch_norm_batch_stats_for_backward");
  return s;
}
inline c10::Symbol batchNormEvalSavesSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::batch_norm_eval_saves");
  return s;
}

// fuser::batch_norm_with_stats(...): aten::batch_norm's schema and, with `training`
// False, its inference formula over the given statistics, differentiable in every operand
// (passes/batch_norm_training.cpp gives it batch statistics, which autograd must see
// through where a fallback runs with gradients on; ATen's op refuses gradients for
// running statistics). The table fuses it as it fuses aten::batch_norm.
inline c10::Symbol batchNormWithStatsSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::batch_norm_with_stats");
  return s;
}

inline c10::Symbol typeGuardIntsAttr() {
  static const c10::Symbol s = c10::Symbol::attr("ints");
  return s;
}

// The int lists a fuser::TypeGuard checks after its ints, flattened: each list's length,
// then its elements.
inline c10::Symbol typeGuardListsAttr() {
  static const c10::Symbol s = c10::Symbol::attr("lists");
  return s;
}

}  // namespace fuser
