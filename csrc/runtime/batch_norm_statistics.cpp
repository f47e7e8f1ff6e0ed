// Operators of batch_norm with batch statistics (runtime/batch_norm_statistics.h).
#include "runtime/batch_norm_statistics.h"

#include <ATen/ATen.h>
#include <ATen/AccumulateType.h>
#include <torch/csrc/jit/runtime/custom_operator.h>

#include <algorithm>
#include <exception>
#include <optional>
#include <vector>

#include "ops/batch_norm.h"
#include "runtime/cuda/cuda_backend.h"
#include "stats.h"

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
    const T* __restrict__ row_mean, const T* __restrict__ row_var, R* running_mean,
    R* running_var, T* mean, T* var, T* invstd, long long samples, long long channels,
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
  running_mean[c] = toRunning((T)momentum * m + (T)(1.0 - momentum) * fromRunning(running_mean[c]));
  running_var[c] =
      toRunning((T)(momentum * unbias) * v + (T)(1.0 - momentum) * fromRunning(running_var[c]));
}
)";

constexpr unsigned kCombineBlock = 256;  // 8 channels per block

// How the kernel reads and writes running statistics of each dtype it takes (R): as they
// are, or 16-bit ones converted from and rounded to float (T) once, as eager's kernels do.
constexpr const char* kSameRunning = R"(
typedef T R;
__device__ T fromRunning(R v) { return v; }
__device__ R toRunning(T v) { return v; }
)";
constexpr const char* kHalfRunning = R"(
typedef unsigned short R;
__device__ T fromRunning(R v) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v)); return f; }
__device__ R toRunning(T v) { R h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v)); return h; }
)";
// bfloat16 rounds to nearest even with integer arithmetic (NaN kept a NaN), on every GPU.
constexpr const char* kBFloat16Running = R"(
typedef unsigned short R;
__device__ T fromRunning(R v) { return __uint_as_float((unsigned)v << 16); }
__device__ R toRunning(T v) {
  const unsigned x = __float_as_uint(v);
  return (R)(v != v ? 0x7fc0u : (x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
)";

// Whether running statistics of dtype `running` take batch statistics of dtype `t`: the
// same, or 16-bit ones beside float (a float16 or bfloat16 model's) — the pairs eager's
// batch_norm takes, float statistics beside a 16-bit tensor, read the other way round.
bool runningDtypeFits(c10::ScalarType running, c10::ScalarType t) {
  return ops::statisticsDtypeFits(/*stats=*/t, /*x=*/running);
}

// The dtype of the saved mean and inverse standard deviation ATen's backward takes beside
// these running statistics: theirs on the CPU (whose backward wants every per-channel
// tensor of one dtype), their accumulation dtype on CUDA (float for 16-bit ones, what
// its backward reads them as; the batch statistics' dtype).
c10::ScalarType savedStatisticsDtype(const at::Tensor& running_mean) {
  const c10::ScalarType running = running_mean.scalar_type();
  return running_mean.is_cpu() ? running : at::toAccumulateType(running, /*is_cuda=*/true);
}

bool combinesOnCuda(const at::Tensor& row_mean, const at::Tensor& row_var,
                    const at::Tensor& running_mean, const at::Tensor& running_var) {
  const c10::ScalarType t = row_mean.scalar_type();
  const c10::ScalarType running = running_mean.scalar_type();
  for (const at::Tensor* x : {&row_mean, &row_var, &running_mean, &running_var}) {
    if (!x->is_cuda() || !x->is_contiguous() || x->device() != running_mean.device()) {
      return false;
    }
  }
  return (t == c10::ScalarType::Float || t == c10::ScalarType::Double) &&
         row_var.scalar_type() == t && running_var.scalar_type() == running &&
         runningDtypeFits(running, t);
}

BatchStatistics combineOnCuda(const at::Tensor& row_mean, const at::Tensor& row_var,
                              at::Tensor& running_mean, at::Tensor& running_var,
                              int64_t samples, int64_t channels, double unbias,
                              double momentum, std::optional<double> eps) {
  BatchStatistics out{at::empty({channels}, row_mean.options()),
                      at::empty({channels}, row_mean.options()), at::Tensor()};
  if (eps) out.invstd = at::empty({channels}, row_mean.options());
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
  // Built once per pair of dtypes (the launch looks the kernel up by its source).
  using c10::ScalarType;
  static const std::string float_source = batchNormCombineSource(ScalarType::Float);
  static const std::string double_source = batchNormCombineSource(ScalarType::Double);
  static const std::string half_source =
      batchNormCombineSource(ScalarType::Float, ScalarType::Half);
  static const std::string bfloat16_source =
      batchNormCombineSource(ScalarType::Float, ScalarType::BFloat16);
  const std::string* source = &double_source;
  switch (running_mean.scalar_type()) {
    case ScalarType::Float: source = &float_source; break;
    case ScalarType::Half: source = &half_source; break;
    case ScalarType::BFloat16: source = &bfloat16_source; break;
    default: break;
  }
  launchCudaSource(*source, kBatchNormCombineKernel, running_mean.device(), grid, kCombineBlock,
                   params);
  stats().batch_statistics_kernels++;
  return out;
}

// ATen ops on [N, C] (CPU, and any layout or dtype the kernel does not take).
BatchStatistics combineWithAten(const at::Tensor& row_mean, const at::Tensor& row_var,
                                at::Tensor& running_mean, at::Tensor& running_var,
                                int64_t samples, int64_t channels, double unbias,
                                double momentum, std::optional<double> eps) {
  const c10::ScalarType t = row_mean.scalar_type();
  auto means = row_mean.reshape({samples, channels});
  auto [between, mean] = at::var_mean(means, {0}, /*correction=*/0, /*keepdim=*/false);
  at::Tensor var = row_var.reshape({samples, channels}).mean(0).add_(between);
  at::NoGradGuard no_grad;
  if (running_mean.scalar_type() == t) {
    running_mean.mul_(1.0 - momentum).add_(mean.detach(), momentum);
    running_var.mul_(1.0 - momentum).add_(var.detach(), momentum * unbias);
  } else {
    // 16-bit running statistics: updated in float and rounded once.
    running_mean.copy_(running_mean.to(t).mul_(1.0 - momentum).add_(mean.detach(), momentum));
    running_var.copy_(
        running_var.to(t).mul_(1.0 - momentum).add_(var.detach(), momentum * unbias));
  }
  return {mean, var, eps ? (var + *eps).rsqrt() : at::Tensor()};
}

// What autodiff's backward reads of the batch statistics (savedStatisticsDtype). The
// saved mean is the batch mean itself where the dtypes agree: nothing writes either.
void pushSaved(torch::jit::Stack& stack, const at::Tensor& x, const at::Tensor& running_mean,
               const at::Tensor& mean, const at::Tensor& invstd) {
  const c10::ScalarType saved = savedStatisticsDtype(running_mean);
  torch::jit::push(stack, mean.to(saved), invstd.to(saved),
                   at::empty({0}, x.options().dtype(at::kByte)));
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
  TORCH_CHECK(runningDtypeFits(running_mean.scalar_type(), row_mean.scalar_type()) &&
                  running_var.scalar_type() == running_mean.scalar_type(),
              "fuser: running statistics of ", running_mean.scalar_type(), " and ",
              running_var.scalar_type(), " beside batch statistics of ",
              row_mean.scalar_type());
  if (x.numel() == 0) {
    // As eager: an empty batch normalizes nothing and leaves the running statistics be.
    // (Copies in the batch statistics' dtype, which the normalization was planned for.)
    const c10::ScalarType t = row_mean.scalar_type();
    at::Tensor mean = running_mean.to(t, false, true);
    torch::jit::push(stack, mean, running_var.to(t, false, true));
    if (for_backward) pushSaved(stack, x, running_mean, mean, (running_var.to(t) + eps).rsqrt());
    return;
  }
  const int64_t count = x.numel() / std::max<int64_t>(x.size(1), 1);
  BatchStatistics s = combineBatchStatistics(row_mean, row_var, running_mean, running_var, count,
                                             momentum, for_backward ? std::optional(eps)
                                                                    : std::nullopt);
  torch::jit::push(stack, s.mean, s.var);
  if (for_backward) pushSaved(stack, x, running_mean, s.mean, s.invstd);
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

// Eval mode's saved statistics: empty, as CPU's native kernel returns them (CUDA's
// backward recomputes empty ones from the running statistics), of the dtype each
// device's backward checks (savedStatisticsDtype).
void evalSaves(torch::jit::Stack& stack) {
  const at::Tensor running_mean = torch::jit::pop(stack).toTensor();
  auto options = running_mean.options().dtype(savedStatisticsDtype(running_mean));
  torch::jit::push(stack, at::empty({0}, options), at::empty({0}, options),
                   at::empty({0}, running_mean.options().dtype(at::kByte)));
}

torch::jit::RegisterOperators batchNormStatisticsRegistration({
    torch::jit::Operator(
        "fuser::batch_norm_batch_stats(Tensor row_mean, Tensor row_var, Tensor input, "
        "Tensor(a!) running_mean, Tensor(b!) running_var, float momentum, float eps) -> "
        "(Tensor, Tensor)",
        [](torch::jit::Stack& stack) { batchStatistics(stack, false); },
        c10::AliasAnalysisKind::FROM_SCHEMA),
    torch::jit::Operator(
        "fuser::batch_norm_batch_stats_for_backward(Tensor row_mean, Tensor row_var, "
        "Tensor input, Tensor(a!) running_mean, Tensor(b!) running_var, float momentum, "
        "float eps) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
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

std::string batchNormCombineSource(c10::ScalarType dtype, std::optional<c10::ScalarType> running) {
  TORCH_CHECK(dtype == c10::ScalarType::Float || dtype == c10::ScalarType::Double,
              "fuser: batch statistics are combined in float or double");
  const c10::ScalarType r = running.value_or(dtype);
  TORCH_CHECK(runningDtypeFits(r, dtype), "fuser: no combining kernel for running statistics of ",
              r, " beside batch statistics of ", dtype);
  const char* conversions = r == c10::ScalarType::Half       ? kHalfRunning
                            : r == c10::ScalarType::BFloat16 ? kBFloat16Running
                                                             : kSameRunning;
  return std::string("typedef ") + (dtype == c10::ScalarType::Float ? "float" : "double") +
         " T;\n" + conversions + kCombineBody;
}

}  // namespace fuser::runtime
