// Dropout's op entries (ops/dropout.h).
#include "ops/dropout.h"
#include "value_types.h"

#include <algorithm>
#include <vector>

#include "ops/lowering_rules.h"
#include "symbols.h"

namespace fuser::ops {
namespace {

using c10::ScalarType;
using torch::jit::Node;

bool floatingInput(const Node* node) {
  auto x = tensorTypeOf(node->input(0));
  return x && x->scalarType() && c10::isFloatingType(*x->scalarType());
}

FusionDecision checkNativeDropout(const Node* node) {
  // Eval mode copies any dtype; eager's random masks refuse all but floating inputs.
  auto train = constantInput(node, "train");
  const bool eval = train && train->isBool() && !train->toBool();
  if (!eval && !floatingInput(node)) {
    return FusionDecision::no("native_dropout in training of a non-floating input");
  }
  return FusionDecision::yes();
}

// Whether `t` has complete strides that cover its elements without gaps or overlaps
// (a permutation of contiguous strides).
bool denseStrides(const c10::TensorTypePtr& t) {
  if (!t || !t->isComplete()) return false;
  const auto sizes = *t->sizes().concrete_sizes();
  const auto strides = *t->strides().concrete_sizes();
  std::vector<size_t> order(sizes.size());
  for (size_t d = 0; d < order.size(); ++d) order[d] = d;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return strides[a] < strides[b]; });
  int64_t expected = 1;
  for (size_t d : order) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

// aten::dropout: in training (train True, or a module's self.training, which
// passes/dropout.cpp branches on) with a constant p in [0, 1]. A constant-False one
// returns its input itself in eager, strides and all, and prepareGraph has removed it;
// the eval copy of a switched one has the input's strides where the input is dense.
FusionDecision checkDropout(const Node* node) {
  auto train = constantInput(node, "train");
  if (train && (!train->isBool() || !train->toBool())) {
    return FusionDecision::no("aten::dropout outside training (it returns its input itself)");
  }
  if (!train && !denseStrides(tensorTypeOf(node->input(0)))) {
    return FusionDecision::no("aten::dropout with a switch, of an input with gaps or overlaps "
                              "(eager's eval mode returns that input itself)");
  }
  auto p = constantInput(node, "p");
  if (!p || !p->isDouble() || !(p->toDouble() >= 0 && p->toDouble() <= 1)) {
    return FusionDecision::no("aten::dropout with p not a constant in [0, 1]");
  }
  if (!floatingInput(node)) return FusionDecision::no("aten::dropout of a non-floating input");
  return FusionDecision::yes();
}

void requireEval(const Operand& train, const char* op) {
  TORCH_CHECK(isConstant(train, 0), "fuser: ", op,
              " in training reaches kernels as fuser::philox_dropout (passes/dropout.cpp)");
}

// (input, p, train) with train False: the output is a copy of the input (of any dtype,
// as eager's), the mask ones.
std::vector<Operand> lowerNativeDropoutOutputs(IrBuilder& b, const Args& a) {
  requireEval(a[2], "native_dropout");
  Operand out = makeResult(a[0].expr, a[0].dtype, {a[0]});
  Operand mask = makeResult(b.intConstant(1, ScalarType::Bool), ScalarType::Bool, {a[0]});
  return {out, mask};
}

Operand lowerNativeDropout(IrBuilder& b, const Args& a) { return lowerNativeDropoutOutputs(b, a)[0]; }

Operand lowerDropout(IrBuilder& b, const Args& a) {
  requireEval(a[2], "dropout");
  return makeResult(a[0].expr, a[0].dtype, {a[0]});
}

FusionDecision checkPhiloxDropout(const Node* node) {
  if (!floatingInput(node)) return FusionDecision::no("philox_dropout of a non-floating input");
  return requireConstant(node, "scale_in_input_dtype");
}

// (input, p, seed, offset, scale_in_input_dtype): element e is kept when its uniform
// draw is below 1 - p, and the output is input * keep * scale, as eager's input *
// mask * scale (inf and NaN inputs give NaN where dropped, as there). The scale is
// eager's: native_dropout's 1 / (1 - p) in double, rounded once with the product; the
// CPU's aten::dropout divides a mask of the input's dtype by 1 - p, so its scale is
// that quotient rounded to the dtype first. p = 1 drops everything and scales by 0.
std::vector<Operand> lowerPhiloxDropoutOutputs(IrBuilder& b, const Args& a) {
  requireFloating(a[0], "philox_dropout");
  const ScalarType t = b.typeOf(a[0].expr);
  const ExprId p = b.cast(a[1].expr, ScalarType::Double);
  const ExprId p1m = b.binary(IrOp::Sub, b.constant(1.0, ScalarType::Double), p);
  const ExprId u = b.philoxUniform(b.cast(a[2].expr, ScalarType::Long),
                                   b.cast(a[3].expr, ScalarType::Long));
  const ExprId keep = b.binary(IrOp::Lt, u, b.cast(p1m, ScalarType::Float));
  ExprId scale;
  ExprId all_dropped;
  if (a[4].constant && a[4].constant->toBool()) {
    const ExprId p1m_t = b.cast(p1m, t);
    scale = b.binary(IrOp::Div, b.constant(1.0, t), p1m_t);
    if (a[0].dtype == ScalarType::Half) scale = b.unary(IrOp::RoundToHalf, scale);
    if (a[0].dtype == ScalarType::BFloat16) scale = b.unary(IrOp::RoundToBFloat16, scale);
    all_dropped = b.binary(IrOp::Eq, p1m_t, b.constant(0.0, t));
  } else {
    scale = b.cast(b.binary(IrOp::Div, b.constant(1.0, ScalarType::Double), p1m), t);
    all_dropped = b.binary(IrOp::Eq, p1m, b.constant(0.0, ScalarType::Double));
  }
  scale = b.select(all_dropped, b.constant(0.0, t), scale);
  const ExprId kept = b.binary(IrOp::Mul, a[0].expr, b.cast(keep, t));
  Operand out = makeResult(b.binary(IrOp::Mul, kept, scale), a[0].dtype, {a[0]});
  Operand mask = makeResult(keep, ScalarType::Bool, {a[0]});
  return {out, mask};
}

Operand lowerPhiloxDropout(IrBuilder& b, const Args& a) { return lowerPhiloxDropoutOutputs(b, a)[0]; }

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

const RegisterOps dropoutRegistration({
    {"aten::native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor)",
     lowerNativeDropout, checkNativeDropout, false, lowerNativeDropoutOutputs},
    {"aten::dropout(Tensor input, float p, bool train) -> Tensor", lowerDropout, checkDropout},
    {"fuser::philox_dropout(Tensor input, float p, int seed, int offset, "
     "bool scale_in_input_dtype) -> (Tensor, Tensor)",
     lowerPhiloxDropout, checkPhiloxDropout, false, lowerPhiloxDropoutOutputs},
    {"aten::native_dropout_backward(Tensor grad_output, Tensor mask, float scale) -> Tensor",
     lowerNativeDropoutBackward, checkNativeDropoutBackward},
});

}  // namespace

bool isNativeDropout(const Node* node) { return node->kind() == c10::aten::native_dropout; }

bool isDropout(const Node* node) {
  return node->kind() == c10::aten::native_dropout || node->kind() == c10::aten::dropout;
}

bool isRandomDropout(const Node* node) {
  if (!isDropout(node)) return false;
  auto train = torch::jit::toIValue(node->input(kDropoutTrain));
  return train && (train->isNone() || (train->isBool() && train->toBool()));
}

}  // namespace fuser::ops
