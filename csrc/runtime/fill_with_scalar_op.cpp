// The fuser::fill_with_scalar_ operator (symbols.h): `x[i:j] = number` without a host
// tensor copied to x's device.
//
// The values are the copy's: aten::tensor makes a float number a tensor of the default
// dtype (float32 unless set otherwise) and an int one int64, then converts it to the
// view's dtype; so does this, on the host, and fills with the result. A view with
// elements sharing memory (an expanded one) is written by the copy it replaces, which
// raises as before: fill_ would not.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <c10/core/DefaultDtype.h>
#include <torch/csrc/jit/runtime/custom_operator.h>
#include <torch/csrc/jit/runtime/operator.h>

#include "symbols.h"

namespace fuser::runtime {
namespace {

// The 0-dim host tensor aten::tensor(number, dtype) holds.
at::Tensor hostNumber(const c10::Scalar& number, c10::ScalarType dtype) {
  const c10::ScalarType made = number.isFloatingPoint()
                                   ? c10::typeMetaToScalarType(c10::get_default_dtype())
                                   : number.type();
  return at::scalar_tensor(number, at::TensorOptions().dtype(made)).to(dtype);
}

at::Tensor& fillWithScalar(at::Tensor& self, const c10::Scalar& number) {
  at::Tensor value = hostNumber(number, self.scalar_type());
  if (at::has_internal_overlap(self) == at::MemOverlap::Yes) {
    return self.copy_(value.to(self.device()));
  }
  return self.fill_(value.item());
}

void fillWithScalarOp(torch::jit::Stack& stack) {
  const c10::Scalar number = torch::jit::pop(stack).toScalar();
  at::Tensor self = torch::jit::pop(stack).toTensor();
  fillWithScalar(self, number);
  torch::jit::push(stack, std::move(self));
}

// A bool is no Scalar to TorchScript's schema matching: it has its own overload.
torch::jit::RegisterOperators fillWithScalarOpRegistration({
    torch::jit::Operator("fuser::fill_with_scalar_(Tensor(a!) self, Scalar value) -> Tensor(a!)",
                         fillWithScalarOp, c10::AliasAnalysisKind::FROM_SCHEMA),
    torch::jit::Operator(
        "fuser::fill_with_scalar_.bool(Tensor(a!) self, bool value) -> Tensor(a!)",
        fillWithScalarOp, c10::AliasAnalysisKind::FROM_SCHEMA),
});

}  // namespace
}  // namespace fuser::runtime
