// Operators of batch_norm with batch statistics (runtime/batch_norm_statistics.h).
#include "runtime/batch_norm_statistics.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/runtime/custom_operator.h>

#include <algorithm>
#include <exception>
#include <optional>
#include <vector>

#include "ops/batch_norm.h"
#include "runtime/cuda/cuda_backend.h"

namespace fuser::runtime {
namespace {

// One warp per channel: its lanes walk the batch (the mean first, then the spread of
// the row means around it and the row variances), summed across the warp. A thread per
// channel walking all N samples waited on one load after another (10 us for 32 x 256).
constexpr const char* kCombineBody = R"(
__device__ T warpSum(T v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
extern "C" __global__ void fuser_batch_norm_combine(
    const T* __restrict__ row_mean, const T* __restrict__ row_var, T* running_mean,
    T* running_var, T* mean, T* var, T* invstd, long long samples, long long channels,
    double momentum, double unbias, double eps) {
  const long long c = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (c >= channels) return;  // the whole warp: c is the same across it
  T sum = 0;
  for (long long n = lane; n < samples; n += 32) sum += row_mean[n * channels + c];
  const T m = warpSum(sum) / (T)samples;
  T spread = 0;
  T within = 0;
  for (long long n = lane; n < samples; n += 32) {
    const T d = row_mean[n * channels + c] - m;
    spread += d * d;
    within += row_var[n * channels + c];
  }
  spread = warpSum(spread);
  within = warpSum(within);
  if (lane != 0) return;
  const T v = (within + spread) / (T)samples;
  mean[c] = m;
  var[c] = v;
  if (invstd != nullptr) invstd[c] = (T)1 / sqrt(v + (T)eps);
  running_mean[c] = (T)momentum * m + (T)(1.0 - momentum) * running_mean[c];
  running_var[c] = (T)(momentum * unbias) * v + (T)(1.0 - momentum) * running_var[c];
}
)";

constexpr unsigned kCombineBlock = 256;  // 8 channels per block

bool combinesOnCuda(const at::Tensor& row_mean, const at::Tensor& row_var,
                    const at::Tensor& running_mean, const at::Tensor& running_var) {
  const c10::ScalarType t = running_mean.scalar_type();
  for (const at::Tensor* x : {&row_mean, &row_var, &running_mean, &running_var}) {
    if (!x->is_cuda() || !x->is_contiguous() || x->scalar_type() != t ||
        x->device() != running_mean.device()) {
      return false;
    }
  }
  return t == c10::ScalarType::Float || t == c10::ScalarType::Double;
}

BatchStatistics combineOnCuda(const at::Tensor& row_mean, const at::Tensor& row_var,
                              at::Tensor& running_mean, at::Tensor& running_var,
                              int64_t samples, int64_t channels, double unbias,
                              double momentum, std::optional<double> eps) {
  BatchStatistics out{at::empty({channels}, running_mean.options()),
                      at::empty({channels}, running_mean.options()), at::Tensor()};
  if (eps) out.invstd = at::empty({channels}, running_mean.options());
  const void* rm_in = row_mean.data_ptr();
  const void* rv_in = row_var.data_ptr();
  void* run_mean = running_mean.data_ptr();
  void* run_var = running_var.data_ptr();
  void* mean = out.mean.data_ptr();
  void* var = out.var.data_ptr();
  void* invstd = eps ? out.invstd.data_ptr() : nullptr;
  long long n = samples;
  long long c = channels;
  double epsilon = eps.value_or(0.0);
  void* params[] = {&rm_in, &rv_in,  &run_mean, &run_var, &mean,   &var,
                    &invstd, &n,     &c,        &momentum, &unbias, &epsilon};
  const int64_t per_block = kCombineBlock / 32;
  const auto grid = static_cast<unsigned>((channels + per_block - 1) / per_block);
  // Built once per dtype (the launch looks the kernel up by its source).
  static const std::string float_source = batchNormCombineSource(c10::ScalarType::Float);
  static const std::string double_source = batchNormCombineSource(c10::ScalarType::Double);
  const bool is_float = running_mean.scalar_type() == c10::ScalarType::Float;
  launchCudaSource(is_float ? float_source : double_source, kBatchNormCombineKernel,
                   running_mean.device(), grid, kCombineBlock, params);
  return out;
}

// ATen ops on [N, C] (CPU, and any layout or dtype the kernel does not take).
BatchStatistics combineWithAten(const at::Tensor& row_mean, const at::Tensor& row_var,
                                at::Tensor& running_mean, at::Tensor& running_var,
                                int64_t samples, int64_t channels, double unbias,
                                double momentum, std::optional<double> eps) {
  const c10::ScalarType t = running_mean.scalar_type();
  auto means = row_mean.to(t).reshape({samples, channels});
  auto [between, mean] = at::var_mean(means, {0}, /*correction=*/0, /*keepdim=*/false);
  at::Tensor var = row_var.to(t).reshape({samples, channels}).mean(0).add_(between);
  at::NoGradGuard no_grad;
  running_mean.mul_(1.0 - momentum).add_(mean.detach(), momentum);
  running_var.mul_(1.0 - momentum).add_(var.detach(), momentum * unbias);
  return {mean, var, eps ? (var + *eps).rsqrt() : at::Tensor()};
}

void batchStatistics(torch::jit::Stack& stack, bool for_backward) {
  const double eps = torch::jit::pop(stack).toDouble();
  const double momentum = torch::jit::pop(stack).toDouble();
  at::Tensor running_var = torch::jit::pop(stack).toTensor();
  at::Tensor running_mean = torch::jit::pop(stack).toTensor();
  const at::Tensor x = torch::jit::pop(stack).toTensor();
  const at::Tensor row_var = torch::jit::pop(stack).toTensor();
  const at::Tensor row_mean = torch::jit::pop(stack).toTensor();
  TORCH_CHECK(running_mean.numel() == x.size(1), "running_mean should contain ", x.size(1),
              " elements not ", running_mean.numel());
  TORCH_CHECK(running_var.numel() == x.size(1), "running_var should contain ", x.size(1),
              " elements not ", running_var.numel());
  if (x.numel() == 0) {
    // As eager: an empty batch normalizes nothing and leaves the running statistics be.
    torch::jit::push(stack, running_mean.clone(), running_var.clone());
    if (for_backward) {
      torch::jit::push(stack, (running_var + eps).rsqrt(),
                       at::empty({0}, x.options().dtype(at::kByte)));
    }
    return;
  }
  const int64_t count = x.numel() / std::max<int64_t>(x.size(1), 1);
  BatchStatistics s = combineBatchStatistics(row_mean, row_var, running_mean, running_var, count,
                                             momentum, for_backward ? std::optional(eps)
                                                                    : std::nullopt);
  torch::jit::push(stack, s.mean, s.var);
  if (for_backward) {
    torch::jit::push(stack, s.invstd, at::empty({0}, x.options().dtype(at::kByte)));
  }
}

// The inference formula over the given statistics, in ATen ops that autograd sees
// through (a fallback that runs with gradients on differentiates the batch statistics).
void normalizeWithStats(torch::jit::Stack& stack) {
  torch::jit::drop(stack, 1);  // cudnn_enabled
  const double eps = torch::jit::pop(stack).toDouble();
  torch::jit::drop(stack, 1);  // momentum
  const bool training = torch::jit::pop(stack).toBool();
  const std::optional<at::Tensor> var = torch::jit::pop(stack).toOptional<at::Tensor>();
  const std::optional<at::Tensor> mean = torch::jit::pop(stack).toOptional<at::Tensor>();
  const std::optional<at::Tensor> bias = torch::jit::pop(stack).toOptional<at::Tensor>();
  const std::optional<at::Tensor> weight = torch::jit::pop(stack).toOptional<at::Tensor>();
  const at::Tensor x = torch::jit::pop(stack).toTensor();
  TORCH_CHECK(!training && mean && var,
              "fuser::batch_norm_with_stats takes statistics, with training False");
  std::vector<int64_t> per_channel(static_cast<size_t>(x.dim()), 1);
  per_channel[1] = x.size(1);
  auto channels = [&](const at::Tensor& t) { return t.reshape(per_channel); };
  at::Tensor y = (x - channels(*mean)) * channels((*var + eps).rsqrt());
  if (weight) y = y * channels(*weight);
  if (bias) y = y + channels(*bias);
  y = y.to(x.scalar_type());
  // Laid out as eager's inference batch_norm lays out its result (ops/batch_norm.h).
  if (ops::batchNormAllocatesInSuggestedFormat(x, weight.value_or(at::Tensor()),
                                               bias.value_or(at::Tensor()), *mean, *var, eps)) {
    y = y.contiguous(x.suggest_memory_format());
  }
  torch::jit::push(stack, y);
}

void evalSaves(torch::jit::Stack& stack) {
  const at::Tensor running_mean = torch::jit::pop(stack).toTensor();
  torch::jit::push(stack, at::empty({0}, running_mean.options()),
                   at::empty({0}, running_mean.options()),
                   at::empty({0}, running_mean.options().dtype(at::kByte)));
}

torch::jit::RegisterOperators registration({
    torch::jit::Operator(
        "fuser::batch_norm_batch_stats(Tensor row_mean, Tensor row_var, Tensor input, "
        "Tensor(a!) running_mean, Tensor(b!) running_var, float momentum, float eps) -> "
        "(Tensor, Tensor)",
        [](torch::jit::Stack& stack) { batchStatistics(stack, false); },
        c10::AliasAnalysisKind::FROM_SCHEMA),
    torch::jit::Operator(
        "fuser::batch_norm_batch_stats_for_backward(Tensor row_mean, Tensor row_var, "
        "Tensor input, Tensor(a!) running_mean, Tensor(b!) running_var, float momentum, "
        "float eps) -> (Tensor, Tensor, Tensor, Tensor)",
        [](torch::jit::Stack& stack) { batchStatistics(stack, true); },
        c10::AliasAnalysisKind::FROM_SCHEMA),
    torch::jit::Operator(
        "fuser::batch_norm_with_stats(Tensor input, Tensor? weight, Tensor? bias, Tensor? mean, "
        "Tensor? var, bool training, float momentum, float eps, bool cudnn_enabled) -> Tensor",
        normalizeWithStats, c10::AliasAnalysisKind::FROM_SCHEMA),
    torch::jit::Operator("fuser::batch_norm_eval_saves(Tensor running_mean) -> "
                         "(Tensor, Tensor, Tensor)",
                         evalSaves, c10::AliasAnalysisKind::FROM_SCHEMA),
});

}  // namespace

BatchStatistics combineBatchStatistics(const at::Tensor& row_mean, const at::Tensor& row_var,
                                       at::Tensor& running_mean, at::Tensor& running_var,
                                       int64_t count, double momentum,
                                       std::optional<double> eps) {
  const int64_t channels = running_mean.numel();
  const int64_t samples = channels == 0 ? 0 : row_mean.numel() / channels;
  // The running variance is unbiased over a channel's `count` elements.
  const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
  // Gradients through the statistics (a fallback run with them on) need ATen's ops.
  const bool grad =
      at::GradMode::is_enabled() && (row_mean.requires_grad() || row_var.requires_grad());
  if (!grad && samples > 0 && combinesOnCuda(row_mean, row_var, running_mean, running_var)) {
    try {
      return combineOnCuda(row_mean, row_var, running_mean, running_var, samples, channels,
                           unbias, momentum, eps);
    } catch (const std::exception& e) {
      // No NVRTC or no launch: nothing was written; ATen's ops give the same statistics.
      TORCH_WARN_ONCE("fuser: the batch statistics kernel did not run (", e.what(),
                      "); combining them with ATen ops");
    }
  }
  return combineWithAten(row_mean, row_var, running_mean, running_var, samples, channels,
                         unbias, momentum, eps);
}

std::string batchNormCombineSource(c10::ScalarType dtype) {
  TORCH_CHECK(dtype == c10::ScalarType::Float || dtype == c10::ScalarType::Double,
              "fuser: batch statistics are combined in float or double");
  return std::string("typedef ") + (dtype == c10::ScalarType::Float ? "float" : "double") +
         " T;\n" + kCombineBody;
}

}  // namespace fuser::runtime
