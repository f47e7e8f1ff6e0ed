// Clamps and binary min/max. Both propagate NaN, from the input and from the bounds, as
// eager does (clamp(nan) is nan; clamp(x, min=nan) is nan). Bounds take part in type
// promotion: clamp(int_tensor, 0.5) is float32.
#include "ops/lowering_rules.h"

namespace fuser::ops {
namespace {

using c10::ScalarType;

// Max or Min of two values of one type; on bool, or / and (printers need no bool Max).
ExprId minMax(IrBuilder& b, IrOp op, ExprId x, ExprId y) {
  if (b.typeOf(x) == ScalarType::Bool) op = op == IrOp::Max ? IrOp::LogicalOr : IrOp::LogicalAnd;
  return b.binary(op, x, y);
}

// max(x, lo) then min(., hi) in the promoted type; absent bounds are null.
Operand lowerClampBounds(IrBuilder& b, const Operand& self, const Operand* lo, const Operand* hi) {
  std::vector<Operand> present{self};
  if (lo) present.push_back(*lo);
  if (hi) present.push_back(*hi);
  TORCH_CHECK(present.size() > 1, "torch.clamp: At least one of 'min' or 'max' must not be None");
  ScalarType t = resultType(present);
  ExprId r = castTo(b, self, t);
  if (lo) r = minMax(b, IrOp::Max, r, castTo(b, *lo, t));
  if (hi) r = minMax(b, IrOp::Min, r, castTo(b, *hi, t));
  return makeResult(r, t, present);
}

const Operand* presentOrNull(const Operand& o) { return isNone(o) ? nullptr : &o; }

Operand lowerClamp(IrBuilder& b, const Args& a) {
  return lowerClampBounds(b, a[0], presentOrNull(a[1]), presentOrNull(a[2]));
}
Operand lowerClampMin(IrBuilder& b, const Args& a) {
  return lowerClampBounds(b, a[0], &a[1], nullptr);
}
Operand lowerClampMax(IrBuilder& b, const Args& a) {
  return lowerClampBounds(b, a[0], nullptr, &a[1]);
}

FusionDecision checkClampBounds(const torch::jit::Node* node) {
  for (const char* name : {"min", "max"}) {
    FusionDecision known = requireKnownPresence(node, name);
    if (!known) return known;
  }
  auto none = [&](const char* name) {
    std::optional<c10::IValue> v = constantInput(node, name);
    return v && v->isNone();
  };
  if (none("min") && none("max")) {
    return FusionDecision::no("clamp: both bounds are None (eager raises)");
  }
  return FusionDecision::yes();
}

template <IrOp Op>
Operand lowerMinMax(IrBuilder& b, const Args& a) {
  ScalarType t = resultType({a[0], a[1]});
  return makeResult(minMax(b, Op, castTo(b, a[0], t), castTo(b, a[1], t)), t, {a[0], a[1]});
}

}  // namespace

static RegisterOps clampingRegistration({
    {"aten::clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor", lowerClamp,
     checkClampBounds},
    {"aten::clamp.Tensor(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor", lowerClamp,
     checkClampBounds},
    {"aten::clip(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor", lowerClamp,
     checkClampBounds},
    {"aten::clip.Tensor(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor", lowerClamp,
     checkClampBounds},
    {"aten::clamp_min(Tensor self, Scalar min) -> Tensor", lowerClampMin},
    {"aten::clamp_min.Tensor(Tensor self, Tensor min) -> Tensor", lowerClampMin},
    {"aten::clamp_max(Tensor self, Scalar max) -> Tensor", lowerClampMax},
    {"aten::clamp_max.Tensor(Tensor self, Tensor max) -> Tensor", lowerClampMax},
    {"aten::maximum(Tensor self, Tensor other) -> Tensor", lowerMinMax<IrOp::Max>},
    {"aten::minimum(Tensor self, Tensor other) -> Tensor", lowerMinMax<IrOp::Min>},
    {"aten::max.other(Tensor self, Tensor other) -> Tensor", lowerMinMax<IrOp::Max>},
    {"aten::min.other(Tensor self, Tensor other) -> Tensor", lowerMinMax<IrOp::Min>},
});

}  // namespace fuser::ops
