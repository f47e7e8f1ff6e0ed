// native_dropout in eval mode and native_dropout_backward (ops/dropout.h).
#include "ops/dropout.h"

#include <vector>

#include "ops/lowering_rules.h"

namespace fuser::ops {
namespace {

using c10::ScalarType;
using torch::jit::Node;

c10::TensorTypePtr tensorTypeOf(const torch::jit::Value* v) {
  return v->type()->cast<c10::TensorType>();
}

bool floatingInput(const Node* node) {
  auto x = tensorTypeOf(node->input(0));
  return x && x->scalarType() && c10::isFloatingType(*x->scalarType());
}

FusionDecision checkNativeDropout(const Node* node) {
  // A non-constant `train` (a module's self.training) is pinned to False by the guard
  // (passes/guard.cpp); None means training, as True does.
  auto train = constantInput(node, "train");
  if (train && (!train->isBool() || train->toBool())) {
    return FusionDecision::no("native_dropout in training (random masks) is not fused yet");
  }
  return FusionDecision::yes();
}

// (input, p, train) with train False: the output is a copy of the input (of any dtype,
// as eager's), the mask ones.
std::vector<Operand> lowerNativeDropoutOutputs(IrBuilder& b, const Args& a) {
  TORCH_CHECK(isConstant(a[2], 0), "fuser: native_dropout's `train` is not pinned to False");
  Operand out = makeResult(a[0].expr, a[0].dtype, {a[0]});
  Operand mask = makeResult(b.intConstant(1, ScalarType::Bool), ScalarType::Bool, {a[0]});
  return {out, mask};
}

Operand lowerNativeDropout(IrBuilder& b, const Args& a) { return lowerNativeDropoutOutputs(b, a)[0]; }

FusionDecision checkNativeDropoutBackward(const Node* node) {
  auto mask = tensorTypeOf(node->input(1));
  if (!mask || mask->scalarType() != ScalarType::Bool) {
    return FusionDecision::no("native_dropout_backward with a mask that is not bool");
  }
  if (!floatingInput(node)) {
    return FusionDecision::no("native_dropout_backward of a non-floating gradient");
  }
  return FusionDecision::yes();
}

// (grad_output, mask, scale): grad * mask * scale in the gradient's computation type;
// the mask being 0 or 1, one rounding gives eager's CPU (two ops) and CUDA (one kernel)
// results alike.
Operand lowerNativeDropoutBackward(IrBuilder& b, const Args& a) {
  requireFloating(a[0], "native_dropout_backward");
  const ScalarType t = b.typeOf(a[0].expr);
  codegen::ExprId kept = b.binary(IrOp::Mul, a[0].expr, b.cast(a[1].expr, t));
  return makeResult(b.binary(IrOp::Mul, kept, b.cast(a[2].expr, t)), a[0].dtype, {a[0]});
}

const RegisterOps kRegister({
    {"aten::native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor)",
     lowerNativeDropout, checkNativeDropout, false, lowerNativeDropoutOutputs},
    {"aten::native_dropout_backward(Tensor grad_output, Tensor mask, float scale) -> Tensor",
     lowerNativeDropoutBackward, checkNativeDropoutBackward},
});

}  // namespace

bool isNativeDropout(const Node* node) { return node->kind() == c10::aten::native_dropout; }

}  // namespace fuser::ops
