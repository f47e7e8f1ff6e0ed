// Inference batch_norm (ops/batch_norm.h), lowered as eager's CUDA kernel computes it:
// (x - mean) * invstd * weight + bias in x's computation type (float for float16 and
// bfloat16, whose statistics may be float16/bfloat16 or float, as eager accepts).
#include "ops/batch_norm.h"
#include "value_types.h"

#include <ATen/native/Normalization.h>

#include <algorithm>
#include <optional>
#include <string>

#include "ops/lowering_rules.h"
#include "symbols.h"

namespace fuser::ops {
namespace {

using c10::ScalarType;
using torch::jit::Node;
using torch::jit::Value;

bool isNoneValue(const Value* v) { return v->type()->kind() == c10::TypeKind::NoneType; }

FusionDecision checkBatchNorm(const Node* node) {
  // A non-constant `training` (a module's self.training) is pinned to False by the
  // guard (passes/guard.cpp); a module in training mode runs the fallback.
  auto training = constantInput(node, "training");
  if (training && (!training->isBool() || training->toBool())) {
    return FusionDecision::no("batch_norm with batch statistics (training) is not fused yet");
  }
  if (auto d = requireConstant(node, "eps"); !d) return d;
  for (const char* name : {"weight", "bias"}) {
    if (auto d = requireKnownPresence(node, name); !d) return d;
  }
  if (isNoneValue(node->input(3)) || isNoneValue(node->input(4))) {
    return FusionDecision::no("batch_norm without running statistics uses batch statistics");
  }
  auto x = tensorTypeOf(node->input(kBatchNormInput));
  if (!x || !x->scalarType() || !x->dim() || *x->dim() < 2 ||
      !c10::isFloatingType(*x->scalarType())) {
    return FusionDecision::no("batch_norm is fused for floating inputs of 2 or more dims");
  }
  std::optional<int64_t> channels;
  if (x->sizes().size()) channels = x->sizes()[1];
  for (size_t slot : kBatchNormChannelOperands) {
    const Value* v = node->input(slot);
    if (isNoneValue(v)) continue;
    auto t = tensorTypeOf(v);
    if (!t || !t->scalarType() || t->dim() != 1u) {
      return FusionDecision::no("batch_norm's %" + v->debugName() +
                                " is not a 1-dim tensor of profiled dtype");
    }
    if (!statisticsDtypeFits(*t->scalarType(), *x->scalarType())) {
      return FusionDecision::no("batch_norm's %" + v->debugName() + " has dtype " +
                                c10::toString(*t->scalarType()) + " beside an input of " +
                                c10::toString(*x->scalarType()));
    }
    std::optional<int64_t> size;
    if (t->sizes().size()) size = t->sizes()[0];
    if (channels && size && *channels != *size) {
      return FusionDecision::no("batch_norm's %" + v->debugName() + " does not hold one " +
                                "element per channel");
    }
  }
  return FusionDecision::yes();
}

// (input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled)
Operand lowerBatchNorm(IrBuilder& b, const Args& a) {
  requireFloating(a[0], "batch_norm");
  TORCH_CHECK(isConstant(a[5], 0), "fuser: batch_norm's `training` is not pinned to False");
  const ScalarType t = b.typeOf(a[0].expr);
  auto read = [&](const Operand& o) { return b.cast(o.expr, t); };
  auto eps = constantNumber(a[7]);
  TORCH_CHECK(eps, "fuser: batch_norm's eps is not a constant");
  ExprId invstd = b.unary(IrOp::Rsqrt, b.binary(IrOp::Add, read(a[4]), b.constant(*eps, t)));
  ExprId y = b.binary(IrOp::Mul, b.binary(IrOp::Sub, a[0].expr, read(a[3])), invstd);
  if (!isNone(a[1])) y = b.binary(IrOp::Mul, y, read(a[1]));
  if (!isNone(a[2])) y = b.binary(IrOp::Add, y, read(a[2]));
  return makeResult(y, a[0].dtype, {a[0]});
}

const RegisterOps batchNormRegistration({
    {"aten::batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, "
     "Tensor? running_var, bool training, float momentum, float eps, bool cudnn_enabled) -> "
     "Tensor",
     lowerBatchNorm, checkBatchNorm},
    {"fuser::batch_norm_with_stats(Tensor input, Tensor? weight, Tensor? bias, Tensor? mean, "
     "Tensor? var, bool training, float momentum, float eps, bool cudnn_enabled) -> Tensor",
     lowerBatchNorm, checkBatchNorm},
});

}  // namespace

bool batchNormAllocatesInSuggestedFormat(const at::Tensor& x, const at::Tensor& weight,
                                         const at::Tensor& bias, const at::Tensor& running_mean,
                                         const at::Tensor& running_var, double eps) {
  if (!x.is_cuda()) return true;
  // Eager's own choice (it reads the dtypes, sizes, eps and the cuDNN flags of now).
  return at::native::_select_batch_norm_backend(x, weight, bias, running_mean, running_var,
                                                /*training=*/false, eps) !=
         at::native::BatchNormBackend::Native;
}

bool statisticsDtypeFits(ScalarType stats, ScalarType x) {
  if (stats == x) return true;
  return stats == ScalarType::Float && (x == ScalarType::Half || x == ScalarType::BFloat16);
}

bool isBatchNorm(const Node* node) {
  return node->kind() == c10::aten::batch_norm || node->kind() == batchNormWithStatsSymbol();
}

bool isBatchNormChannelOperand(const Node* node, size_t input) {
  const auto& slots = kBatchNormChannelOperands;
  return isBatchNorm(node) && std::find(slots.begin(), slots.end(), input) != slots.end();
}

}  // namespace fuser::ops
