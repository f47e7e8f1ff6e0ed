// The fuser::dense_attention_mask operator (symbols.h): an attention mask CUDA's fused
// attention kernels take. Where the graph does not say how the mask is laid out (its
// producer's result was not profiled), the copy is decided here, per call, from the
// tensor itself; a mask the kernels already take costs no copy.
#include <ATen/ATen.h>
#include <torch/csrc/jit/runtime/custom_operator.h>
#include <torch/csrc/jit/runtime/operator.h>

#include "symbols.h"

namespace fuser::runtime {
namespace {

at::Tensor denseAttentionMask(const at::Tensor& mask) {
  if (!mask.is_cuda() || mask.dim() == 0 || mask.size(-1) <= 1 || mask.stride(-1) == 1) {
    return mask;
  }
  return mask.contiguous();
}

torch::jit::RegisterOperators denseAttentionMaskOpRegistration({torch::jit::Operator(
    "fuser::dense_attention_mask(Tensor(a) mask) -> Tensor(a)",
    [](torch::jit::Stack& stack) {
      at::Tensor mask = torch::jit::pop(stack).toTensor();
      torch::jit::push(stack, denseAttentionMask(mask));
    },
    c10::AliasAnalysisKind::FROM_SCHEMA)});

}  // namespace
}  // namespace fuser::runtime
