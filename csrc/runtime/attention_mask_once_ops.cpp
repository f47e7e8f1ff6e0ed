// The operators passes/attention_masks_once.cpp puts in a graph (symbols.h): a boolean
// attention mask converted once to the additive mask attention would make of it, and
// attention that takes the converted mask only where attention itself would have made
// exactly those values from the boolean one.
#include <ATen/ATen.h>
#include <ATen/ScalarOps.h>
#include <torch/csrc/jit/runtime/custom_operator.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <limits>
#include <optional>

namespace fuser::runtime {
namespace {

// The backends of ATen's SDPBackend enum (_fused_sdp_choice's result) that convert a
// boolean mask to 0 / -inf in the query's dtype before they run. cuDNN's conversion
// uses another value for false, and the math path is left its own handling.
constexpr int64_t kFlashAttention = 1;
constexpr int64_t kEfficientAttention = 2;

at::Tensor additiveAttentionMask(const at::Tensor& mask, const at::Tensor& query) {
  if (mask.scalar_type() != at::kBool) return mask;
  // 0-dim CPU tensors of the query's dtype (the result's): scalars to the kernel, made
  // without an operator of their own (no fill on the mask's device, none on the CPU).
  const auto scalar = [&](double value) {
    return at::detail::scalar_tensor_static(value, query.scalar_type(), at::kCPU);
  };
  return at::where(mask, scalar(0.0), scalar(-std::numeric_limits<double>::infinity()));
}

struct Attention {
  at::Tensor query, key, value;
  double dropout_p;
  bool is_causal;
  std::optional<double> scale;
  bool enable_gqa;

  int64_t backendFor(const std::optional<at::Tensor>& mask) const {
    return at::_fused_sdp_choice(query, key, value, mask, dropout_p, is_causal, scale,
                                 enable_gqa);
  }

  at::Tensor operator()(const std::optional<at::Tensor>& mask) const {
    return at::scaled_dot_product_attention(query, key, value, mask, dropout_p, is_causal,
                                            scale, enable_gqa);
  }
};

// Whether attention handed `mask` would convert it to exactly `additive` and run the same
// kernel as when handed `additive`.
bool convertsTo(const Attention& attention, const at::Tensor& mask, const at::Tensor& additive) {
  if (mask.scalar_type() != at::kBool || additive.scalar_type() != attention.query.scalar_type() ||
      additive.sizes() != mask.sizes() || additive.device() != mask.device()) {
    return false;
  }
  const int64_t backend = attention.backendFor(mask);
  if (backend != kFlashAttention && backend != kEfficientAttention) return false;
  try {
    return attention.backendFor(additive) == backend;
  } catch (const c10::Error&) {
    return false;  // no backend for it (the user's sdpa_kernel choice): the boolean mask
  }
}

at::Tensor attentionWithAdditiveMask(const Attention& attention,
                                     const std::optional<at::Tensor>& mask,
                                     const std::optional<at::Tensor>& additive) {
  if (mask && additive && convertsTo(attention, *mask, *additive)) return attention(additive);
  return attention(mask);
}

torch::jit::RegisterOperators registration({
    torch::jit::Operator(
        "fuser::additive_attention_mask(Tensor(a) mask, Tensor query) -> Tensor(a)",
        [](torch::jit::Stack& stack) {
          at::Tensor query = torch::jit::pop(stack).toTensor();
          at::Tensor mask = torch::jit::pop(stack).toTensor();
          torch::jit::push(stack, additiveAttentionMask(mask, query));
        },
        c10::AliasAnalysisKind::FROM_SCHEMA),
    torch::jit::Operator(
        "fuser::scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, "
        "Tensor? attn_mask, Tensor? additive_mask, float dropout_p, bool is_causal, "
        "float? scale, bool enable_gqa) -> Tensor",
        [](torch::jit::Stack& stack) {
          const bool enable_gqa = torch::jit::pop(stack).toBool();
          const std::optional<double> scale = torch::jit::pop(stack).toOptional<double>();
          const bool is_causal = torch::jit::pop(stack).toBool();
          const double dropout_p = torch::jit::pop(stack).toDouble();
          auto additive = torch::jit::pop(stack).toOptional<at::Tensor>();
          auto mask = torch::jit::pop(stack).toOptional<at::Tensor>();
          at::Tensor value = torch::jit::pop(stack).toTensor();
          at::Tensor key = torch::jit::pop(stack).toTensor();
          at::Tensor query = torch::jit::pop(stack).toTensor();
          const Attention attention{std::move(query), std::move(key), std::move(value),
                                    dropout_p,        is_causal,      scale,
                                    enable_gqa};
          torch::jit::push(stack, attentionWithAdditiveMask(attention, mask, additive));
        },
        c10::AliasAnalysisKind::FROM_SCHEMA),
});

}  // namespace
}  // namespace fuser::runtime
