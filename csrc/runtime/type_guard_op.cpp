// The fuser::TypeGuard operator: `%ok = fuser::TypeGuard[types=[...]](tensors...)`.
//
// True iff every tensor is defined and has the dtype, the device (type and index) and
// the rank of its entry in `types`, and does not need autograd history (requires_grad
// while grad mode is on: our kernels record none). Sizes and strides are never checked:
// a new batch size must reuse the fused path. On false, stats().guard_failures counts it
// and the graph runs the group's fallback.
//
// This runs on every call of a fused graph: the expected types are read once, when the
// operation is created, and the check is a flat loop over the stack.
#include <ATen/core/grad_mode.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/custom_operator.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <vector>

#include "stats.h"
#include "symbols.h"

namespace fuser {
namespace {

struct ExpectedTensor {
  c10::ScalarType dtype;
  c10::Device device;
  int64_t rank;
};

bool matches(const c10::IValue& value, const ExpectedTensor& expected, bool grad_enabled) {
  if (!value.isTensor()) return false;
  const at::Tensor& t = value.toTensor();
  return t.defined() && t.scalar_type() == expected.dtype && t.device() == expected.device &&
         t.dim() == expected.rank && !(grad_enabled && t.requires_grad());
}

torch::jit::Operation createTypeGuard(const torch::jit::Node* node) {
  std::vector<ExpectedTensor> expected;
  for (const c10::TypePtr& type : node->tys(torch::jit::attr::types)) {
    auto tensor = type->expect<c10::TensorType>();
    TORCH_CHECK(tensor->scalarType() && tensor->device() && tensor->dim(),
                "fuser::TypeGuard needs complete types (dtype, device, rank), got ", type->str());
    expected.push_back(
        {*tensor->scalarType(), *tensor->device(), static_cast<int64_t>(*tensor->dim())});
  }
  TORCH_CHECK(expected.size() == node->inputs().size(), "fuser::TypeGuard has ",
              node->inputs().size(), " inputs but ", expected.size(), " types");
  return [expected = std::move(expected)](torch::jit::Stack& stack) {
    const size_t n = expected.size();
    const bool grad_enabled = at::GradMode::is_enabled();
    bool ok = true;
    for (size_t i = 0; i < n && ok; ++i) {
      ok = matches(torch::jit::peek(stack, i, n), expected[i], grad_enabled);
    }
    torch::jit::drop(stack, n);
    torch::jit::push(stack, ok);
    if (!ok) stats().guard_failures++;
  };
}

torch::jit::RegisterOperators registration({torch::jit::Operator(
    typeGuardSymbol(), createTypeGuard, c10::AliasAnalysisKind::PURE_FUNCTION)});

}  // namespace
}  // namespace fuser
