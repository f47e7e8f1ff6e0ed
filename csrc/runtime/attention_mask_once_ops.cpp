// The operators passes/attention_masks_once.cpp puts in a graph (symbols.h): a boolean
// attention mask converted once to the additive mask attention's backend would make of
// it, and attention that takes the converted mask only where attention itself would have
// made exactly those values from the boolean one.
#include <ATen/ATen.h>
#include <ATen/ScalarOps.h>
#include <torch/csrc/jit/runtime/custom_operator.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include "runtime/cuda/stream_capture.h"

namespace fuser::runtime {
namespace {

// Backends of ATen's SDPBackend enum (_fused_sdp_choice's result).
constexpr int64_t kFlashAttention = 1;
constexpr int64_t kEfficientAttention = 2;
constexpr int64_t kCudnnAttention = 3;

// What a converted mask holds where the boolean mask is false. Flash and memory-efficient
// attention convert to -inf; cuDNN attention to -65504, a finite value ATen uses to work
// around cuDNN's handling of -inf (checked on this torch before it is used:
// cudnnConvertsLikeUs). kBoolean: not converted, the boolean mask itself.
enum MaskForm : int64_t { kBoolean = 0, kInfinity = 1, kCudnn = 2 };

MaskForm formOfBackend(int64_t backend) {
  if (backend == kFlashAttention || backend == kEfficientAttention) return kInfinity;
  if (backend == kCudnnAttention) return kCudnn;
  return kBoolean;  // the math path and any other: they handle the boolean mask themselves
}

at::Tensor converted(const at::Tensor& mask, at::ScalarType dtype, MaskForm form) {
  const double false_value = form == kCudnn ? -65504.0 : -std::numeric_limits<double>::infinity();
  // 0-dim CPU tensors of the query's dtype (the result's): scalars to the kernel, made
  // without an operator of their own (no fill on the mask's device, none on the CPU).
  const auto scalar = [&](double value) {
    return at::detail::scalar_tensor_static(value, dtype, at::kCPU);
  };
  return at::where(mask, scalar(0.0), scalar(false_value));
}

struct Attention {
  at::Tensor query, key, value;
  double dropout_p;
  bool is_causal;
  std::optional<double> scale;
  bool enable_gqa;

  // Attention's arguments within an operator's `args`: query, key and value from
  // `qkv_at`, dropout_p, is_causal, scale and enable_gqa from `rest_at`.
  static Attention from(const std::vector<c10::IValue>& args, size_t qkv_at, size_t rest_at) {
    return Attention{args[qkv_at].toTensor(),           args[qkv_at + 1].toTensor(),
                     args[qkv_at + 2].toTensor(),       args[rest_at].toDouble(),
                     args[rest_at + 1].toBool(),        args[rest_at + 2].toOptional<double>(),
                     args[rest_at + 3].toBool()};
  }

  int64_t backendFor(const std::optional<at::Tensor>& mask) const {
    return at::_fused_sdp_choice(query, key, value, mask, dropout_p, is_causal, scale,
                                 enable_gqa);
  }

  at::Tensor operator()(const std::optional<at::Tensor>& mask) const {
    return at::scaled_dot_product_attention(query, key, value, mask, dropout_p, is_causal,
                                            scale, enable_gqa);
  }
};

// Whether cuDNN attention converts a boolean mask as converted(.., kCudnn) does, on this
// torch: its value for false is a workaround that may change between versions. Checked
// once per process, dtype and device, on the first layer's own arguments: attention of
// the mask with one row that attends to nothing (where the false value decides the
// result, every key weighted alike) against attention of our conversion of it, bit for
// bit. A probe that attention would not run on cuDNN, or that raises, answers no (kept:
// the probe is not made again on every call). nullopt where dropout makes results
// random, or while the stream is captured into a CUDA graph (the comparison reads the
// device): not checked, and not kept.
std::optional<bool> probeCudnnConversion(const Attention& attention, const at::Tensor& mask) {
  if (attention.dropout_p != 0.0 || mask.dim() == 0 || mask.numel() == 0 ||
      cuda::currentStreamCapturing(mask.device())) {
    return std::nullopt;
  }
  try {
    at::Tensor probe = mask.clone(at::MemoryFormat::Contiguous);
    probe.view({-1, probe.size(-1)})[0].fill_(false);
    const at::Tensor additive = converted(probe, attention.query.scalar_type(), kCudnn);
    if (attention.backendFor(probe) != kCudnnAttention ||
        attention.backendFor(additive) != kCudnnAttention) {
      return false;
    }
    at::NoGradGuard no_grad;
    return at::equal(attention(probe), attention(additive));
  } catch (const c10::Error&) {
    return false;
  }
}

bool cudnnConvertsLikeUs(const Attention& attention, const at::Tensor& mask) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int, int>, bool> verdicts;  // by dtype, device type, index
  const auto key = std::make_tuple(static_cast<int>(attention.query.scalar_type()),
                                   static_cast<int>(mask.device().type()),
                                   static_cast<int>(mask.device().index()));
  std::lock_guard<std::mutex> lock(mutex);
  if (auto known = verdicts.find(key); known != verdicts.end()) return known->second;
  const std::optional<bool> verdict = probeCudnnConversion(attention, mask);
  if (!verdict) return false;  // not checked: the boolean mask this time
  verdicts.emplace(key, *verdict);
  return *verdict;
}

// The first layer's mask in the form its backend converts a boolean mask to, and that
// form; a mask that is not boolean, or whose backend keeps it boolean, as it is.
std::tuple<at::Tensor, int64_t> convertForFirstLayer(const Attention& first,
                                                     const at::Tensor& mask) {
  if (mask.scalar_type() != at::kBool) return {mask, kBoolean};
  MaskForm form = formOfBackend(first.backendFor(mask));
  if (form == kCudnn && !cudnnConvertsLikeUs(first, mask)) form = kBoolean;
  if (form == kBoolean) return {mask, kBoolean};
  return {converted(mask, first.query.scalar_type(), form), form};
}

// Whether attention handed `mask` would convert it to exactly `additive` (of `form`) and
// run the same kernel as when handed `additive`.
bool convertsTo(const Attention& attention, const at::Tensor& mask, const at::Tensor& additive,
                int64_t form) {
  if (form == kBoolean || mask.scalar_type() != at::kBool ||
      additive.scalar_type() != attention.query.scalar_type() ||
      additive.sizes() != mask.sizes() || additive.device() != mask.device()) {
    return false;
  }
  const int64_t backend = attention.backendFor(mask);
  if (formOfBackend(backend) != form) return false;
  try {
    return attention.backendFor(additive) == backend;
  } catch (const c10::Error&) {
    return false;  // no backend for it (the user's sdpa_kernel choice): the boolean mask
  }
}

torch::jit::RegisterOperators attentionMaskOnceOpsRegistration({
    torch::jit::Operator(
        "fuser::additive_attention_mask(Tensor(a) mask, Tensor query, Tensor key, "
        "Tensor value, float dropout_p, bool is_causal, float? scale, bool enable_gqa) "
        "-> (Tensor(a), int)",
        [](torch::jit::Stack& stack) {
          // mask, query, key, value, dropout_p, is_causal, scale, enable_gqa
          const std::vector<c10::IValue> args = torch::jit::pop(stack, 8);
          auto [mask, form] = convertForFirstLayer(Attention::from(args, 1, 4), args[0].toTensor());
          torch::jit::push(stack, std::move(mask), form);
        },
        c10::AliasAnalysisKind::FROM_SCHEMA),
    torch::jit::Operator(
        "fuser::scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, "
        "Tensor? attn_mask, Tensor? additive_mask, int additive_form, float dropout_p, "
        "bool is_causal, float? scale, bool enable_gqa) -> Tensor",
        [](torch::jit::Stack& stack) {
          // query, key, value, attn_mask, additive_mask, additive_form, dropout_p, ...
          const std::vector<c10::IValue> args = torch::jit::pop(stack, 10);
          const Attention attention = Attention::from(args, 0, 6);
          const auto mask = args[3].toOptional<at::Tensor>();
          const auto additive = args[4].toOptional<at::Tensor>();
          const bool take_additive =
              mask && additive && convertsTo(attention, *mask, *additive, args[5].toInt());
          torch::jit::push(stack, attention(take_additive ? additive : mask));
        },
        c10::AliasAnalysisKind::FROM_SCHEMA),
});

}  // namespace
}  // namespace fuser::runtime
