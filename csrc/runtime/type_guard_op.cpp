// The fuser::TypeGuard operator:
// `%ok = fuser::TypeGuard[types=[...], ints=[...], lists=[...]](tensors..., ints...,
// lists...)`.
//
// True iff every tensor is defined and has the dtype, the device (type and index) and
// the rank of its entry in `types`, and does not need autograd history (requires_grad
// while grad mode is on: our kernels record none), and every int after the tensors
// equals its entry in `ints` (absent: none; dtypes the group reads as constants; a
// bool compares as 0 or 1), and every int list after those equals its entry in `lists`
// (each entry its length, then its elements: the sizes autodiff's _grad_sum_to_size
// sums to, which fix the dims the group reduces). Tensor sizes and strides are never checked:
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
  std::vector<int64_t> ints;
  if (node->hasAttribute(typeGuardIntsAttr())) ints = node->is(typeGuardIntsAttr());
  std::vector<std::vector<int64_t>> lists;
  if (node->hasAttribute(typeGuardListsAttr())) {
    const std::vector<int64_t>& flat = node->is(typeGuardListsAttr());
    for (size_t i = 0; i < flat.size(); i += 1 + static_cast<size_t>(flat[i])) {
      TORCH_CHECK(flat[i] >= 0 && i + 1 + flat[i] <= flat.size(), "fuser::TypeGuard's lists ",
                  "attribute is malformed");
      lists.emplace_back(flat.begin() + i + 1, flat.begin() + i + 1 + flat[i]);
    }
  }
  TORCH_CHECK(expected.size() + ints.size() + lists.size() == node->inputs().size(),
              "fuser::TypeGuard has ", node->inputs().size(), " inputs but ", expected.size(),
              " types, ", ints.size(), " ints and ", lists.size(), " lists");
  return [expected = std::move(expected), ints = std::move(ints),
          lists = std::move(lists)](torch::jit::Stack& stack) {
    const size_t tensors = expected.size();
    const size_t n = tensors + ints.size() + lists.size();
    const bool grad_enabled = at::GradMode::is_enabled();
    bool ok = true;
    for (size_t i = 0; i < tensors && ok; ++i) {
      ok = matches(torch::jit::peek(stack, i, n), expected[i], grad_enabled);
    }
    for (size_t i = 0; i < ints.size() && ok; ++i) {
      const c10::IValue& value = torch::jit::peek(stack, tensors + i, n);
      ok = (value.isInt() && value.toInt() == ints[i]) ||
           (value.isBool() && int64_t{value.toBool()} == ints[i]);
    }
    for (size_t i = 0; i < lists.size() && ok; ++i) {
      const c10::IValue& value = torch::jit::peek(stack, tensors + ints.size() + i, n);
      ok = value.isIntList() && value.toIntList().size() == lists[i].size();
      for (size_t j = 0; ok && j < lists[i].size(); ++j) {
        ok = value.toIntList().get(j) == lists[i][j];
      }
    }
    torch::jit::drop(stack, n);
    torch::jit::push(stack, ok);
    if (!ok) stats().guard_failures++;
  };
}

torch::jit::RegisterOperators typeGuardOpRegistration({torch::jit::Operator(
    typeGuardSymbol(), createTypeGuard, c10::AliasAnalysisKind::PURE_FUNCTION)});

}  // namespace
}  // namespace fuser
