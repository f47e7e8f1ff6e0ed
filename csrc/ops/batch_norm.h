// aten::batch_norm in inference (training False: a constant, or a module's
// self.training that the guard pins to False): per element of x,
//   y = (x - running_mean) * rsqrt(running_var + eps) * weight + bias,
// with the four statistics and affine tensors of shape [C] read along x's dim 1. It is
// elementwise over x, so it joins elementwise groups (BatchNorm + ReLU in one pass);
// its [C] operands stay group inputs, which the kernel reads as [C, 1, ..., 1]
// (runtime/kernel_graph.h: KernelInputSource::channels_of). x is a group input too, so
// the runtime checks each call that the operands hold x.size(1) elements, as eager does.
// Batch statistics (training) reduce over every dim but 1: not fused yet.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/jit/ir/ir.h>

#include <array>
#include <cstddef>

namespace fuser::ops {

// Inputs of aten::batch_norm: x, then weight, bias, running_mean, running_var, training.
inline constexpr size_t kBatchNormInput = 0;
inline constexpr std::array<size_t, 4> kBatchNormChannelOperands = {1, 2, 3, 4};
inline constexpr size_t kBatchNormTraining = 5;

// Whether input `input` of a batch_norm `node` is one of its per-channel operands.
bool isBatchNormChannelOperand(const torch::jit::Node* node, size_t input);

// Whether eager's inference batch_norm of these operands (undefined: None) allocates its
// result in x's suggested memory format: on CPU, and on CUDA where it takes cuDNN; ATen's
// own CUDA kernel allocates like x (memory_format=preserve).
bool batchNormAllocatesInSuggestedFormat(const at::Tensor& x, const at::Tensor& weight,
                                         const at::Tensor& bias, const at::Tensor& running_mean,
                                         const at::Tensor& running_var, double eps);

// Whether eager's batch_norm takes per-channel statistics (or weights) of dtype `stats`
// beside an input of dtype `x`: x's own, or float beside float16/bfloat16.
bool statisticsDtypeFits(c10::ScalarType stats, c10::ScalarType x);

// Whether `node` is an aten::batch_norm or a fuser::batch_norm_with_stats, which shares
// its schema (the table's entry decides whether it fuses).
bool isBatchNorm(const torch::jit::Node* node);

}  // namespace fuser::ops
