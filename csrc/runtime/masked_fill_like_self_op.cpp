// The fuser::masked_fill_like_self operator (symbols.h), where the interpreter runs it (a
// fallback graph, a group that runs interpreted): self cloned with its own strides, then
// ATen's masked_fill_ on the clone, so its checks and result are the in-place op's.
#include <ATen/ATen.h>
#include <torch/csrc/jit/runtime/custom_operator.h>
#include <torch/csrc/jit/runtime/operator.h>

#include "symbols.h"

namespace fuser::runtime {
namespace {

template <typename Value>
void maskedFillLikeSelf(torch::jit::Stack& stack) {
  const Value value = torch::jit::pop(stack).to<Value>();
  const at::Tensor mask = torch::jit::pop(stack).toTensor();
  at::Tensor result = torch::jit::pop(stack).toTensor().clone(at::MemoryFormat::Preserve);
  result.masked_fill_(mask, value);
  torch::jit::push(stack, std::move(result));
}

torch::jit::RegisterOperators maskedFillLikeSelfOpRegistration({
    torch::jit::Operator(
        "fuser::masked_fill_like_self.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor",
        maskedFillLikeSelf<at::Scalar>, c10::AliasAnalysisKind::FROM_SCHEMA),
    torch::jit::Operator(
        "fuser::masked_fill_like_self.Tensor(Tensor self, Tensor mask, Tensor value) -> Tensor",
        maskedFillLikeSelf<at::Tensor>, c10::AliasAnalysisKind::FROM_SCHEMA),
});

}  // namespace
}  // namespace fuser::runtime
