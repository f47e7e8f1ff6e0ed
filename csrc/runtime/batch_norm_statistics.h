// The interpreter's side of batch_norm with batch statistics
// (passes/batch_norm_training.cpp): the operators it inserts, and the combination of
// per-sample rows into per-channel statistics, on CUDA one kernel of its own.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>

namespace fuser::runtime {

struct BatchStatistics {
  at::Tensor mean;  // [C]
  at::Tensor var;   // [C], biased (what the normalization divides by)
  at::Tensor invstd;  // [C], 1 / sqrt(var + eps) where asked (autodiff's backward reads it)
};

// Per channel, from `row_mean` and `row_var` ([N, C, 1, ...]: each sample's channel over
// `count / N` elements): the mean of the row means, and the mean of the row variances
// plus the variance of the row means (every row holds as many elements). Updates
// `running_mean` and `running_var` in place as eager does: (1 - momentum) * running +
// momentum * batch, the variance unbiased over the `count` elements of a channel.
// The rows and the results share one floating dtype; the running statistics have it, or
// are float16 or bfloat16 beside float rows (updated in float, rounded once). With `eps`,
// also the inverse standard deviation.
BatchStatistics combineBatchStatistics(const at::Tensor& row_mean, const at::Tensor& row_var,
                                       at::Tensor& running_mean, at::Tensor& running_var,
                                       int64_t count, double momentum,
                                       std::optional<double> eps);

// The CUDA source of the combining kernel for statistics of `dtype` (Float or Double) and
// running statistics of `running` (`dtype`, or Half or BFloat16 beside Float), and its name.
std::string batchNormCombineSource(c10::ScalarType dtype,
                                   std::optional<c10::ScalarType> running = std::nullopt);
inline constexpr const char* kBatchNormCombineKernel = "fuser_batch_norm_combine";

}  // namespace fuser::runtime
