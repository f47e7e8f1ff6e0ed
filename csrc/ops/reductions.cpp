// Reductions over trailing dims, and the normalizations and softmax built from them,
// lowered with eager's formulas: accumulation in float for float16/bfloat16 (double for
// double), the mean before the centred sum of squares (as eager's two-pass and Welford
// variances give), the row maximum subtracted before exp.
#include "ops/reductions.h"

#include <algorithm>
#include <limits>

#include "config.h"
#include "ops/lowering_rules.h"
#include "symbols.h"

namespace fuser::ops {
namespace {

using c10::ScalarType;
using codegen::ReduceKind;
using torch::jit::Node;
using torch::jit::Value;

std::optional<int64_t> profiledRank(const torch::jit::Value* v) {
  auto type = v->type()->cast<c10::TensorType>();
  if (!type || !type->dim()) return std::nullopt;
  return static_cast<int64_t>(*type->dim());
}

// The number of trailing dims `dims` names, when it names exactly the last ones of a
// tensor of `rank` dims (in any order, negative or not, each once).
std::optional<int64_t> trailingCount(const std::vector<int64_t>& dims, int64_t rank) {
  if (dims.empty() || static_cast<int64_t>(dims.size()) > rank) return std::nullopt;
  std::vector<bool> seen(rank, false);
  for (int64_t d : dims) {
    if (d < -rank || d >= rank) return std::nullopt;
    const int64_t wrapped = d < 0 ? d + rank : d;
    if (seen[wrapped]) return std::nullopt;
    seen[wrapped] = true;
  }
  const int64_t k = static_cast<int64_t>(dims.size());
  for (int64_t d = rank - k; d < rank; ++d) {
    if (!seen[d]) return std::nullopt;
  }
  return k;
}

// `dims` wrapped into [0, rank) and sorted, when each names a dim of `rank` once.
std::optional<std::vector<int64_t>> distinctDims(const std::vector<int64_t>& dims, int64_t rank) {
  if (dims.empty()) return std::nullopt;
  std::vector<int64_t> out;
  for (int64_t d : dims) {
    if (d < -rank || d >= rank) return std::nullopt;
    out.push_back(d < 0 ? d + rank : d);
  }
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) return std::nullopt;
  return out;
}

// Whether a reduction takes every dim: sum(self), mean(self), any(self) and all(self),
// or a `dim` of None or [] (eager's sum, mean, var, std, var_mean, std_mean, amax and
// amin then reduce the whole tensor).
bool reducesEveryDim(const Node* node) {
  if (!node->schema().argumentIndexWithName("dim")) {
    return node->kind() == c10::aten::sum || node->kind() == c10::aten::mean ||
           node->kind() == c10::aten::any || node->kind() == c10::aten::all;
  }
  static const c10::Symbol kinds[] = {c10::aten::sum,      c10::aten::mean, c10::aten::var,
                                      c10::aten::std,      c10::aten::amax, c10::aten::amin,
                                      c10::aten::var_mean, c10::aten::std_mean};
  if (std::find(std::begin(kinds), std::end(kinds), node->kind()) == std::end(kinds)) return false;
  auto dim = constantInput(node, "dim");
  return dim && (dim->isNone() || (dim->isIntList() && dim->toIntVector().empty()));
}

std::optional<std::vector<int64_t>> constantIntList(const Node* node, const char* name) {
  auto v = constantInput(node, name);
  if (!v) return std::nullopt;
  if (v->isIntList()) return v->toIntVector();
  if (v->isInt()) return std::vector<int64_t>{v->toInt()};
  return std::nullopt;
}

// Constant groups; weight and bias of the input's dtype, one element per channel.
FusionDecision checkGroupNorm(const Node* node) {
  auto groups = constantInput(node, "num_groups");
  if (!groups || !groups->isInt() || groups->toInt() < 1) {
    return FusionDecision::no("group_norm's num_groups is not a constant");
  }
  if (auto d = requireConstant(node, "eps"); !d) return d;
  auto x = node->input(0)->type()->cast<c10::TensorType>();
  std::optional<int64_t> channels;
  if (x->sizes().size() && *x->sizes().size() >= 2) channels = x->sizes()[1];
  if (channels && *channels % groups->toInt() != 0) {
    return FusionDecision::no("group_norm's channels do not split into its groups");
  }
  for (const char* name : {"weight", "bias"}) {
    const torch::jit::Value* v = node->namedInput(name);
    if (v->type()->kind() == c10::TypeKind::NoneType) continue;
    auto t = v->type()->cast<c10::TensorType>();
    if (!t || t->scalarType() != x->scalarType() || t->dim() != 1u) {
      return FusionDecision::no(std::string("group_norm's ") + name +
                                " is not a 1-dim tensor of the input's dtype");
    }
    std::optional<int64_t> size;
    if (t->sizes().size()) size = t->sizes()[0];
    if (channels && size && *channels != *size) {
      return FusionDecision::no(std::string("group_norm's ") + name +
                                " does not hold one element per channel");
    }
  }
  return FusionDecision::yes();
}

// sum, mean, softmax and log_softmax may be given a constant dtype: the input is cast to
// it first, as eager does; integers and bools sum as int64, as eager's do.
FusionDecision checkResultDtype(const Node* node) {
  auto type = node->input(0)->type()->cast<c10::TensorType>();
  if (!type || !type->scalarType() || c10::isComplexType(*type->scalarType())) {
    return FusionDecision::no("reductions are fused for real inputs of a profiled dtype");
  }
  const bool sum = node->kind() == c10::aten::sum;
  if (node->kind() == c10::aten::any || node->kind() == c10::aten::all) {
    // Every real dtype gives bool, but uint8, which eager answers in uint8.
    if (*type->scalarType() != ScalarType::Byte) return FusionDecision::yes();
    return FusionDecision::no("any and all of a uint8 tensor are uint8: left to eager");
  }
  std::optional<c10::IValue> dtype;
  if (node->schema().argumentIndexWithName("dtype")) {
    dtype = constantInput(node, "dtype");
    if (!dtype) return FusionDecision::no("a reduction's dtype argument is not a constant");
  }
  if (dtype && !dtype->isNone()) {
    const auto target = static_cast<ScalarType>(dtype->toInt());
    // Eager's CPU mean sums a wider input in float and rounds once to a 16-bit dtype; its
    // CUDA mean rounds the input first. Neither is fused.
    if (node->kind() == c10::aten::mean && target != *type->scalarType() &&
        (target == ScalarType::Half || target == ScalarType::BFloat16)) {
      return FusionDecision::no("a mean into another 16-bit dtype is left to eager");
    }
    if (c10::isFloatingType(target) || (sum && target == ScalarType::Long)) {
      return FusionDecision::yes();
    }
    return FusionDecision::no("a reduction's dtype argument is not a floating dtype");
  }
  if (c10::isFloatingType(*type->scalarType())) return FusionDecision::yes();
  if (sum && c10::isIntegralType(*type->scalarType(), /*includeBool=*/true)) {
    return FusionDecision::yes();
  }
  return FusionDecision::no("reductions are fused for floating inputs of a profiled dtype");
}

// Pools to one element per channel of floating CPU tensors profiled contiguous (3 or 4
// dims). Eager gives a channels-last input's result channels-last strides, which the
// row kernels' per-row outputs do not take: such calls run interpreted
// (RowExecutor::plan), and CUDA pools, whose convnets run channels-last, stay with ATen.
FusionDecision checkAdaptiveAveragePool(const Node* node) {
  auto size = constantIntList(node, "output_size");
  if (!size || std::any_of(size->begin(), size->end(), [](int64_t s) { return s != 1; })) {
    return FusionDecision::no("adaptive_avg_pool2d to more than one element per channel");
  }
  auto type = node->input(0)->type()->cast<c10::TensorType>();
  if (!type || !type->isComplete() || !type->device()->is_cpu() ||
      !c10::isFloatingType(*type->scalarType())) {
    return FusionDecision::no("adaptive_avg_pool2d is fused for floating CPU tensors");
  }
  const size_t rank = *type->dim();
  if ((rank != 3 && rank != 4) || !isProfiledRowMajor(*type)) {
    return FusionDecision::no("adaptive_avg_pool2d of a tensor not profiled contiguous");
  }
  return FusionDecision::yes();
}

FusionDecision checkRowReduction(const Node* node) {
  if (auto d = checkResultDtype(node); !d) return d;
  for (const char* name : {"unbiased", "correction", "p"}) {
    if (node->schema().argumentIndexWithName(name) && !constantInput(node, name)) {
      return FusionDecision::no(std::string("its `") + name + "` is not a constant");
    }
  }
  if (node->kind() == c10::aten::norm) {
    auto p = constantInput(node, "p");
    if (!p->isNone() && !(p->isInt() && p->toInt() == 2) &&
        !(p->isDouble() && p->toDouble() == 2.0)) {
      return FusionDecision::no("only the 2-norm is fused");
    }
  }
  if (isShapeNormalization(node) || node->kind() == c10::aten::group_norm) {
    if (auto d = requireKnownPresence(node, "weight"); !d) return d;
  }
  if (isLayerNorm(node) || node->kind() == c10::aten::group_norm) {
    if (auto d = requireKnownPresence(node, "bias"); !d) return d;
  }
  // rms_norm's eps is an optional float: a constant (None or a number) is printed.
  if (node->kind() == c10::aten::rms_norm) {
    auto eps = constantInput(node, "eps");
    if (!eps || !(eps->isNone() || eps->isDouble())) {
      return FusionDecision::no("rms_norm's eps is not a constant");
    }
  }
  if (node->kind() == c10::aten::group_norm) {
    if (auto d = checkGroupNorm(node); !d) return d;
  }
  // The dtype of native_layer_norm's statistics depends on the device
  // (layerNormStatisticsType): a 16-bit input's is fused where its device is known.
  if (node->kind() == c10::aten::native_layer_norm) {
    auto type = node->input(0)->type()->cast<c10::TensorType>();
    const ScalarType t = *type->scalarType();
    const bool known = type->device() && (type->device()->is_cpu() || type->device()->is_cuda());
    if (isReducedFloat(t) && !known) {
      return FusionDecision::no("native_layer_norm of a 16-bit input on no profiled device");
    }
  }
  if (!rowReductionOf(node)) {
    return FusionDecision::no("it does not reduce over constant dims of an input of profiled "
                              "rank");
  }
  return FusionDecision::yes();
}

// A floating gradient: its sum keeps the dtype (an integer sum would widen to int64).
FusionDecision checkGradSumToSize(const Node* node) {
  if (!config().gradient_sums) return FusionDecision::no("FUSER_GRADIENT_SUMS=0");
  auto type = node->input(0)->type()->cast<c10::TensorType>();
  if (!type || !type->scalarType() || !c10::isFloatingType(*type->scalarType())) {
    return FusionDecision::no("_grad_sum_to_size is fused for floating gradients");
  }
  if (!rowReductionOf(node)) {
    return FusionDecision::no("its size is neither a constant nor profiled on its result, or it "
                              "sums both leading dims and dims of size 1 (or none)");
  }
  return FusionDecision::yes();
}

// ---- Lowerings ----------------------------------------------------------------------

ExprId rowMean(IrBuilder& b, ExprId x) {
  return b.binary(IrOp::Div, b.reduce(ReduceKind::Sum, x), b.rowSize(b.typeOf(x)));
}

// A row's mean and its sum of squared deviations sum((x - mean)^2). Two passes: the
// first's mean m = sum(x) / n can be an ulp off, as on a row of equal values, where
// eager's Welford mean is exact and rstd (up to 1 / sqrt(eps)) would magnify the ulp in
// every normalized element. The second pass sums c = x - m and c^2 together and corrects
// both (the corrected two-pass algorithm of Chan, Golub and LeVeque): mean m + sum(c) / n,
// squares sum(c^2) - sum(c)^2 / n, clamped at 0 (rounding); a row of equal values gets
// its exact mean and 0. Where the kernel asks for one pass (Kernel::one_pass_variance)
// both come from Welford's running triple, also exact there.
struct RowMoments {
  ExprId mean;
  ExprId squares;
};

RowMoments rowMoments(IrBuilder& b, ExprId x) {
  if (b.onePassVariance()) {
    return {b.reduce(ReduceKind::WelfordMean, x), b.reduce(ReduceKind::SquaredDeviations, x)};
  }
  const ExprId first_mean = rowMean(b, x);
  const ScalarType t = b.typeOf(x);
  const ExprId centred = b.binary(IrOp::Sub, x, first_mean);
  const ExprId centred_sum = b.reduce(ReduceKind::Sum, centred);
  const ExprId deviation = b.binary(IrOp::Div, centred_sum, b.rowSize(t));
  const ExprId squares =
      b.binary(IrOp::Sub, b.reduce(ReduceKind::Sum, b.binary(IrOp::Mul, centred, centred)),
               b.binary(IrOp::Mul, deviation, centred_sum));
  return {b.binary(IrOp::Add, first_mean, deviation),
          b.binary(IrOp::Max, squares, b.constant(0, t))};
}

// What a variance divides the squares by: max(n - correction, 0), as eager divides.
ExprId besselDivisor(IrBuilder& b, ScalarType t, double correction) {
  return b.binary(IrOp::Max, b.binary(IrOp::Sub, b.rowSize(t), b.constant(correction, t)),
                  b.constant(0, t));
}

ExprId rowVariance(IrBuilder& b, ExprId x, double correction) {
  const ScalarType t = b.typeOf(x);
  return b.binary(IrOp::Div, rowMoments(b, x).squares, besselDivisor(b, t, correction));
}

double correctionOf(const Operand& o, double none) {
  if (isNone(o)) return none;
  if (o.constant && o.constant->isBool()) return o.constant->toBool() ? 1 : 0;
  auto v = constantNumber(o);
  TORCH_CHECK(v, "fuser: a reduction's correction is not a constant");
  return *v;
}

// What a reduction given `dtype` (an argument, perhaps None) computes and returns: that
// dtype, else int64 for a sum of integers or bools, else its input's dtype.
ScalarType resultDtype(const Operand& self, const Operand& dtype, bool sum) {
  if (!isNone(dtype)) {
    TORCH_CHECK(dtype.constant && dtype.constant->isInt(), "fuser: a reduction's dtype is not a constant");
    return static_cast<ScalarType>(dtype.constant->toInt());
  }
  if (sum && c10::isIntegralType(self.dtype, /*includeBool=*/true)) return ScalarType::Long;
  return self.dtype;
}

// The input as a reduction computes it: cast to its result dtype first (a float16 sum
// with dtype=float32 reads its input in float32, as eager's does).
Operand asResultDtype(IrBuilder& b, const Operand& self, ScalarType dtype) {
  Operand x = self;
  x.expr = castTo(b, self, dtype);
  x.dtype = dtype;
  return x;
}

Operand lowerSum(IrBuilder& b, const Args& a) {  // (self, dim, keepdim, dtype)
  const ScalarType t = resultDtype(a[0], a[3], /*sum=*/true);
  TORCH_CHECK(c10::isFloatingType(t) || t == ScalarType::Long,
              "fuser: sums are fused into floating or int64 results");
  const Operand x = asResultDtype(b, a[0], t);
  return makeResult(b.reduce(ReduceKind::Sum, x.expr), t, {x});
}

// Autodiff's sum of a broadcast operand's gradient back to its size (self, size): a sum
// in self's dtype over the dims rowReductionOf finds in the size.
Operand lowerGradSumToSize(IrBuilder& b, const Args& a) {
  requireFloating(a[0], "_grad_sum_to_size");  // (an integer sum would widen to int64)
  return lowerSum(b, {a[0], Operand{}, Operand{}, Operand{}});
}

Operand lowerMean(IrBuilder& b, const Args& a) {  // (self, dim, keepdim, dtype)
  const Operand x = asResultDtype(b, a[0], resultDtype(a[0], a[3], /*sum=*/false));
  requireFloating(x, "mean");
  return makeResult(rowMean(b, x.expr), x.dtype, {x});
}

// adaptive_avg_pool2d to one element per channel (self, output_size): eager's is
// mean(self, (-1, -2), keepdim=True), whose dims rowReductionOf gives.
Operand lowerAdaptiveAveragePool(IrBuilder& b, const Args& a) {
  return lowerMean(b, {a[0], Operand{}, Operand{}, Operand{}});
}

// The whole-tensor forms (self, dtype): the same with every dim reduced.
Operand lowerWholeSum(IrBuilder& b, const Args& a) {
  return lowerSum(b, {a[0], Operand{}, Operand{}, a[1]});
}
Operand lowerWholeMean(IrBuilder& b, const Args& a) {
  return lowerMean(b, {a[0], Operand{}, Operand{}, a[1]});
}

template <ReduceKind Kind>
Operand lowerExtreme(IrBuilder& b, const Args& a) {
  requireFloating(a[0], Kind == ReduceKind::Max ? "amax" : "amin");
  return makeResult(b.reduce(Kind, a[0].expr), a[0].dtype, {a[0]});
}

// any(self), all(self): the largest or smallest of 1 (a nonzero element, NaN included)
// and 0 over the tensor, compared with 1/2 so that an empty tensor's identity (-inf for
// the largest, +inf for the smallest) gives eager's false and true.
template <ReduceKind Kind>
Operand lowerTruth(IrBuilder& b, const Args& a) {
  const ExprId x = a[0].expr;
  const ExprId nonzero = a[0].dtype == ScalarType::Bool
                             ? x
                             : b.binary(IrOp::Ne, x, b.constant(0.0, b.typeOf(x)));
  const ScalarType f = ScalarType::Float;
  const ExprId flag = b.select(nonzero, b.constant(1.0, f), b.constant(0.0, f));
  const ExprId r = b.binary(IrOp::Gt, b.reduce(Kind, flag), b.constant(0.5, f));
  return makeResult(r, ScalarType::Bool, {a[0]});
}

// (self, dim, unbiased or correction, keepdim): unbiased is correction 1 or 0.
template <bool Std>
Operand lowerVariance(IrBuilder& b, const Args& a) {
  requireFloating(a[0], Std ? "std" : "var");
  ExprId v = rowVariance(b, a[0].expr, correctionOf(a[2], 1));
  return makeResult(Std ? b.unary(IrOp::Sqrt, v) : v, a[0].dtype, {a[0]});
}

// var_mean and std_mean (self, dim, unbiased or correction, keepdim): the variance (or
// its root) and the mean of one pass's statistics, the mean corrected as layer_norm's
// (exact on a row of equal values, as eager's Welford mean is).
template <bool Std>
std::vector<Operand> lowerVarianceAndMean(IrBuilder& b, const Args& a) {
  requireFloating(a[0], Std ? "std_mean" : "var_mean");
  const ExprId x = a[0].expr;
  const ScalarType t = b.typeOf(x);
  const RowMoments moments = rowMoments(b, x);
  const ExprId v = b.binary(IrOp::Div, moments.squares, besselDivisor(b, t, correctionOf(a[2], 1)));
  return {makeResult(Std ? b.unary(IrOp::Sqrt, v) : v, a[0].dtype, {a[0]}),
          makeResult(moments.mean, a[0].dtype, {a[0]})};
}

template <bool Std>
Operand lowerVarianceOfMean(IrBuilder& b, const Args& a) {
  return lowerVarianceAndMean<Std>(b, a)[0];
}

Operand lowerNorm(IrBuilder& b, const Args& a) {  // (self, p, dim, keepdim), p = 2
  requireFloating(a[0], "norm");
  ExprId x = a[0].expr;
  ExprId v = b.unary(IrOp::Sqrt, b.reduce(ReduceKind::Sum, b.binary(IrOp::Mul, x, x)));
  return makeResult(v, a[0].dtype, {a[0]});
}

// exp(x - max) * (1 / sum(exp(x - max))); the log form x - max - log(sum(exp(x - max))).
// One division per row, as eager's CPU kernel: a division per element (CUDA eager's) is
// some ten instructions, which float16 rows, at half the bytes, no longer hide.
template <bool Log>
Operand lowerSoftmax(IrBuilder& b, const Args& a) {  // (self, dim, dtype)
  const Operand in = asResultDtype(b, a[0], resultDtype(a[0], a[2], /*sum=*/false));
  requireFloating(in, "softmax");
  ExprId x = in.expr;
  ExprId shifted = b.binary(IrOp::Sub, x, b.reduce(ReduceKind::Max, x));
  ExprId e = b.unary(IrOp::Exp, shifted);
  ExprId sum = b.reduce(ReduceKind::Sum, e, /*sum_in_type=*/true);
  ExprId y = Log ? b.binary(IrOp::Sub, shifted, b.unary(IrOp::Log, sum))
                 : b.binary(IrOp::Mul, e, b.binary(IrOp::Div, b.constant(1.0, b.typeOf(e)), sum));
  return makeResult(y, in.dtype, {in});
}

// Softmax's gradient from its output y: y * (g - sum(g * y)); log_softmax's from its
// output: g - exp(y) * sum(g). Summed in the computation type, as eager's kernels sum
// (float for 16-bit dtypes), and rounded once.
template <bool Log>
Operand lowerSoftmaxBackward(IrBuilder& b, const Args& a) {  // (grad, output, dim, dtype)
  requireFloating(a[0], Log ? "_log_softmax_backward_data" : "_softmax_backward_data");
  TORCH_CHECK(a[0].dtype == a[1].dtype, "fuser: softmax backward of mixed dtypes");
  const ExprId g = a[0].expr, y = a[1].expr;
  ExprId grad;
  if (Log) {
    ExprId sum = b.reduce(ReduceKind::Sum, g, /*sum_in_type=*/true);
    grad = b.binary(IrOp::Sub, g, b.binary(IrOp::Mul, b.unary(IrOp::Exp, y), sum));
  } else {
    ExprId sum = b.reduce(ReduceKind::Sum, b.binary(IrOp::Mul, g, y), /*sum_in_type=*/true);
    grad = b.binary(IrOp::Mul, y, b.binary(IrOp::Sub, g, sum));
  }
  return makeResult(grad, a[0].dtype, {a[0], a[1]});
}

// The gradient, the output and the recorded input dtype share one floating dtype: a
// softmax taken with another dtype (half to float) is left to eager. Autodiff passes the
// input dtype as a value of the forward; the guard pins it to the result's profiled
// dtype (eager's result has the input dtype), which must then be the gradient's.
FusionDecision checkSoftmaxBackward(const Node* node) {
  auto grad = node->input(0)->type()->cast<c10::TensorType>();
  auto out = node->input(1)->type()->cast<c10::TensorType>();
  auto result = node->output()->type()->cast<c10::TensorType>();
  std::optional<ScalarType> input_dtype;
  if (auto dtype = constantInput(node, "input_dtype"); dtype && dtype->isInt()) {
    input_dtype = static_cast<ScalarType>(dtype->toInt());
  } else if (result && result->scalarType()) {
    input_dtype = *result->scalarType();
  }
  if (!grad || !out || !grad->scalarType() || !out->scalarType() || !input_dtype ||
      *grad->scalarType() != *out->scalarType() || *input_dtype != *grad->scalarType() ||
      !c10::isFloatingType(*grad->scalarType())) {
    return FusionDecision::no("softmax backward with mixed or non-floating dtypes");
  }
  if (!rowReductionOf(node)) {
    return FusionDecision::no("it does not reduce over a constant trailing dim");
  }
  return FusionDecision::yes();
}

// The dtype of native_layer_norm's mean and rstd, as eager gives them: float for a
// 16-bit input on CUDA; on CPU the input's dtype, float where the weight or the bias is of
// another dtype than a 16-bit input (eager's mixed types); otherwise the input's.
ScalarType layerNormStatisticsType(c10::DeviceType device, const Args& a) {
  const ScalarType x = a[0].dtype;
  if (!isReducedFloat(x)) return x;
  if (device == c10::DeviceType::CUDA) return ScalarType::Float;
  const bool mixed = (!isNone(a[2]) && a[2].dtype != x) || (!isNone(a[3]) && a[3].dtype != x);
  return mixed ? ScalarType::Float : x;
}

// (x - mean) * rsqrt(var + eps) * weight + bias, var biased; weight and bias are read in
// the input's computation type, as eager's kernels read them. Returns the output, the
// row mean and rstd (native_layer_norm's three results; layer_norm's is the first).
// (input, normalized_shape, weight, bias, eps) for both ops; group_norm's arguments
// (input, num_groups, weight, bias, eps, ...) sit at the same places, and its row is one
// group, whose weight and bias the row executor reads per channel.
std::vector<Operand> lowerLayerNormOutputs(IrBuilder& b, const Args& a) {
  requireFloating(a[0], "layer_norm");
  ExprId x = a[0].expr;
  const ScalarType t = b.typeOf(x);
  const RowMoments moments = rowMoments(b, x);
  ExprId mean = moments.mean;
  ExprId centred = b.binary(IrOp::Sub, x, mean);
  ExprId var = b.binary(IrOp::Div, moments.squares, b.rowSize(t));
  ExprId eps = a[4].expr >= 0 ? b.cast(a[4].expr, t) : b.constant(1e-5, t);
  ExprId rstd = b.unary(IrOp::Rsqrt, b.binary(IrOp::Add, var, eps));
  ExprId y = b.binary(IrOp::Mul, centred, rstd);
  if (!isNone(a[2])) y = b.binary(IrOp::Mul, y, b.cast(a[2].expr, t));
  if (!isNone(a[3])) y = b.binary(IrOp::Add, y, b.cast(a[3].expr, t));
  const ScalarType statistics = layerNormStatisticsType(b.device(), a);
  return {makeResult(y, a[0].dtype, {a[0]}), makeResult(mean, statistics, {a[0]}),
          makeResult(rstd, statistics, {a[0]})};
}

Operand lowerLayerNorm(IrBuilder& b, const Args& a) { return lowerLayerNormOutputs(b, a)[0]; }

// rms_norm (input, normalized_shape, weight, eps): x * rsqrt(mean(x^2) + eps) * weight in
// the input's computation type (float for 16-bit dtypes), rounded once, as eager's
// kernel does; eps None is the computation type's machine epsilon (float's for 16-bit
// inputs), as eager's.
Operand lowerRmsNorm(IrBuilder& b, const Args& a) {
  requireFloating(a[0], "rms_norm");
  const ExprId x = a[0].expr;
  const ScalarType t = b.typeOf(x);
  const bool given = a[3].constant && a[3].constant->isDouble();
  const double eps = given ? a[3].constant->toDouble()
                     : t == ScalarType::Double ? std::numeric_limits<double>::epsilon()
                                               : std::numeric_limits<float>::epsilon();
  const ExprId squares = rowMean(b, b.binary(IrOp::Mul, x, x));
  const ExprId rms = b.unary(IrOp::Rsqrt, b.binary(IrOp::Add, squares, b.constant(eps, t)));
  ExprId y = b.binary(IrOp::Mul, x, rms);
  if (!isNone(a[2])) y = b.binary(IrOp::Mul, y, b.cast(a[2].expr, t));
  return makeResult(y, a[0].dtype, {a[0]});
}

// layer_norm's input gradient (passes/layer_norm_backward.cpp) from the forward's row
// mean and rstd: with gw = grad * weight and xhat = (x - mean) * rstd,
//   (gw - mean(gw) - xhat * mean(gw * xhat)) * rstd,
// both row means in one pass, in the input's computation type (float for 16-bit
// dtypes), rounded once as eager's kernels round. Eager sums gw * x and subtracts
// mean * sum(gw) afterwards; centring first loses less where the mean is large.
// (grad_out, input, normalized_shape, mean, rstd, weight)
Operand lowerLayerNormInputGrad(IrBuilder& b, const Args& a) {
  requireFloating(a[1], "layer_norm_input_grad");
  const ScalarType t = b.typeOf(a[1].expr);
  const ExprId x = a[1].expr;
  const ExprId rstd = b.cast(a[4].expr, t);
  const ExprId xhat = b.binary(IrOp::Mul, b.binary(IrOp::Sub, x, b.cast(a[3].expr, t)), rstd);
  ExprId gw = b.cast(a[0].expr, t);
  if (!isNone(a[5])) gw = b.binary(IrOp::Mul, gw, b.cast(a[5].expr, t));
  const ExprId centred = b.binary(IrOp::Sub, gw, rowMean(b, gw));
  const ExprId projection = b.binary(IrOp::Mul, xhat, rowMean(b, b.binary(IrOp::Mul, gw, xhat)));
  const ExprId grad = b.binary(IrOp::Mul, b.binary(IrOp::Sub, centred, projection), rstd);
  return makeResult(grad, a[1].dtype, {a[0], a[1]});
}

// The gradient, the input and the weight share one floating dtype (eager requires it);
// the mean and rstd are floating (float for a 16-bit input on CUDA).
FusionDecision checkLayerNormInputGrad(const Node* node) {
  auto dtypeOf = [&](size_t i) -> std::optional<ScalarType> {
    auto type = node->input(i)->type()->cast<c10::TensorType>();
    if (!type) return std::nullopt;
    return type->scalarType();
  };
  const std::optional<ScalarType> x = dtypeOf(1);
  if (!x || !c10::isFloatingType(*x) || dtypeOf(0) != x) {
    return FusionDecision::no("layer_norm_input_grad of mixed or non-floating dtypes");
  }
  for (size_t i : {3, 4}) {
    if (!dtypeOf(i) || !c10::isFloatingType(*dtypeOf(i))) {
      return FusionDecision::no("layer_norm_input_grad's mean or rstd is not floating");
    }
  }
  if (auto d = requireKnownPresence(node, "weight"); !d) return d;
  if (node->input(5)->type()->kind() != c10::TypeKind::NoneType && dtypeOf(5) != x) {
    return FusionDecision::no("layer_norm_input_grad's weight is not of the input's dtype");
  }
  if (!rowReductionOf(node)) {
    return FusionDecision::no(
        "its normalized_shape is neither a constant nor its weight's sizes naming trailing dims");
  }
  return FusionDecision::yes();
}

const RegisterOps reductionsRegistration({
    {"aten::sum(Tensor self, *, ScalarType? dtype=None) -> Tensor", lowerWholeSum,
     checkRowReduction, true},
    {"aten::mean(Tensor self, *, ScalarType? dtype=None) -> Tensor", lowerWholeMean,
     checkRowReduction, true},
    {"aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? "
     "dtype=None) -> Tensor", lowerSum, checkRowReduction, true},
    {"aten::mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) "
     "-> Tensor", lowerMean, checkRowReduction, true},
    {"aten::adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor",
     lowerAdaptiveAveragePool, checkAdaptiveAveragePool, true},
    {"aten::any(Tensor self) -> Tensor", lowerTruth<ReduceKind::Max>, checkRowReduction, true},
    {"aten::all(Tensor self) -> Tensor", lowerTruth<ReduceKind::Min>, checkRowReduction, true},
    {"aten::amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor",
     lowerExtreme<ReduceKind::Max>, checkRowReduction, true},
    {"aten::amin(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor",
     lowerExtreme<ReduceKind::Min>, checkRowReduction, true},
    {"aten::var.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor",
     lowerVariance<false>, checkRowReduction, true},
    {"aten::std.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor",
     lowerVariance<true>, checkRowReduction, true},
    {"aten::var.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool "
     "keepdim=False) -> Tensor", lowerVariance<false>, checkRowReduction, true},
    {"aten::std.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool "
     "keepdim=False) -> Tensor", lowerVariance<true>, checkRowReduction, true},
    {"aten::var_mean.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> "
     "(Tensor, Tensor)",
     lowerVarianceOfMean<false>, checkRowReduction, true, lowerVarianceAndMean<false>},
    {"aten::std_mean.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> "
     "(Tensor, Tensor)",
     lowerVarianceOfMean<true>, checkRowReduction, true, lowerVarianceAndMean<true>},
    {"aten::var_mean.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool "
     "keepdim=False) -> (Tensor, Tensor)",
     lowerVarianceOfMean<false>, checkRowReduction, true, lowerVarianceAndMean<false>},
    {"aten::std_mean.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool "
     "keepdim=False) -> (Tensor, Tensor)",
     lowerVarianceOfMean<true>, checkRowReduction, true, lowerVarianceAndMean<true>},
    {"aten::norm.ScalarOpt_dim(Tensor self, Scalar? p, int[1] dim, bool keepdim=False) -> Tensor",
     lowerNorm, checkRowReduction, true},
    {"aten::_grad_sum_to_size(Tensor(a) self, int[]? size) -> Tensor(a)", lowerGradSumToSize,
     checkGradSumToSize, true},
    {"aten::softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor",
     lowerSoftmax<false>, checkRowReduction, true},
    {"aten::log_softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor",
     lowerSoftmax<true>, checkRowReduction, true},
    {"aten::_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType "
     "input_dtype) -> Tensor", lowerSoftmaxBackward<false>, checkSoftmaxBackward, true},
    {"aten::_log_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType "
     "input_dtype) -> Tensor", lowerSoftmaxBackward<true>, checkSoftmaxBackward, true},
    {"aten::layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? "
     "bias=None, float eps=1.0000000000000001e-05, bool cudnn_enable=True) -> Tensor",
     lowerLayerNorm, checkRowReduction, true},
    {"aten::native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? "
     "bias, float eps) -> (Tensor, Tensor, Tensor)",
     lowerLayerNorm, checkRowReduction, true, lowerLayerNormOutputs},
    {"fuser::layer_norm_input_grad(Tensor grad_out, Tensor input, int[] normalized_shape, Tensor "
     "mean, Tensor rstd, Tensor? weight) -> Tensor",
     lowerLayerNormInputGrad, checkLayerNormInputGrad, true},
    {"aten::rms_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, float? "
     "eps=None) -> Tensor",
     lowerRmsNorm, checkRowReduction, true},
    {"aten::group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, "
     "float eps=1.0000000000000001e-05, bool cudnn_enabled=True) -> Tensor",
     lowerLayerNorm, checkRowReduction, true},
});

}  // namespace

bool isGroupNormAffine(const Node* node, size_t input) {
  return node->kind() == c10::aten::group_norm &&
         (input == kGroupNormWeight || input == kGroupNormBias);
}

bool isLayerNorm(const Node* node) {
  return node->kind() == c10::aten::layer_norm || node->kind() == c10::aten::native_layer_norm;
}

bool isShapeNormalization(const Node* node) {
  return isLayerNorm(node) || node->kind() == c10::aten::rms_norm;
}

std::optional<std::vector<int64_t>> normalizedShapeOf(const Node* node) {
  if (!isShapeNormalization(node) && !isLayerNormInputGrad(node)) return std::nullopt;
  if (auto shape = constantIntList(node, "normalized_shape")) return shape;
  auto weight = node->namedInput("weight")->type()->cast<c10::TensorType>();
  if (!weight) return std::nullopt;
  return weight->sizes().concrete_sizes();
}

std::optional<size_t> sizeListInput(const Node* node) {
  if (node->kind() == c10::aten::_grad_sum_to_size || isShapeNormalization(node)) return 1;
  if (isLayerNormInputGrad(node)) return 2;
  return std::nullopt;
}

bool isLayerNormInputGrad(const Node* node) { return node->kind() == layerNormInputGradSymbol(); }

std::optional<std::vector<int64_t>> gradSumTarget(const Node* node) {
  if (node->kind() != c10::aten::_grad_sum_to_size) return std::nullopt;
  if (auto size = constantInput(node, "size")) {
    if (size->isIntList()) return size->toIntVector();
    return std::nullopt;  // None: self itself
  }
  auto type = node->output()->type()->cast<c10::TensorType>();
  if (!type) return std::nullopt;
  return type->sizes().concrete_sizes();
}

namespace {

// _grad_sum_to_size(self, size) sums self's leading dims (those past size's rank) and
// the dims size gives as 1, keeping the latter. A row reduction takes either kind,
// not both (its result keeps every reduced dim or none). Every dim the size gives as 1
// is reduced, also where self's is 1 too (eager skips it; summing one element changes
// nothing): the guard pins the size, not self's sizes, so a dim of self that was 1 when
// profiled may not be at run time. A sum that reduced nothing when profiled (no
// leading dim, and self's size 1 wherever the size is: a None size's result, a no-op)
// is left to ATen, which returns self itself.
std::optional<RowReduction> gradSumReduction(const Node* node, int64_t rank) {
  auto target = gradSumTarget(node);
  if (!target) return std::nullopt;
  const int64_t leading = rank - static_cast<int64_t>(target->size());
  if (leading < 0) return std::nullopt;
  auto self = node->input(0)->type()->cast<c10::TensorType>();
  RowReduction r;
  r.rank = rank;
  bool reduces_some = leading > 0;
  for (int64_t d = 0; d < leading; ++d) r.dims.push_back(d);
  for (size_t i = 0; i < target->size(); ++i) {
    if ((*target)[i] != 1) continue;
    const int64_t d = leading + static_cast<int64_t>(i);
    r.dims.push_back(d);
    // (an unknown size may be more than one)
    const bool size_one = self && self->sizes()[d] == 1;
    reduces_some = reduces_some || !size_one;
  }
  const bool units = r.dims.size() > static_cast<size_t>(leading);
  if (!reduces_some || (leading > 0 && units)) return std::nullopt;
  r.reduced = static_cast<int64_t>(r.dims.size());
  r.result = leading > 0 ? RowReduction::Result::DropDims : RowReduction::Result::KeepDims;
  if (trailingCount(r.dims, rank)) r.dims.clear();  // the trailing ones
  return r;
}

}  // namespace

bool isColumnSumBeside(const Node* node, const RowReduction& row) {
  const bool sum = node->kind() == c10::aten::sum;
  if (!sum && node->kind() != c10::aten::_grad_sum_to_size) return false;
  if (!row.dims.empty() || row.groups != 0 || row.reduced >= row.rank) return false;
  if (sum) {
    auto dtype = constantInput(node, "dtype");
    if (!dtype || !dtype->isNone()) return false;
  }
  // Float and 16-bit values: the kernels keep float partial sums.
  auto type = node->input(0)->type()->cast<c10::TensorType>();
  if (!type || !type->scalarType() || !c10::isFloatingType(*type->scalarType()) ||
      *type->scalarType() == c10::ScalarType::Double) {
    return false;
  }
  auto column = rowReductionOf(node);
  if (!column || column->rank != row.rank || column->result == RowReduction::Result::Whole) {
    return false;
  }
  std::vector<int64_t> leading;
  for (int64_t d = 0; d < row.rank - row.reduced; ++d) leading.push_back(d);
  return column->dims == leading;
}

bool isFloatingConversion(const Node* node) {
  // aten::to.dtype: (self, dtype, non_blocking, copy, memory_format), no other tensor.
  if (node->kind() != c10::aten::to || node->outputs().size() != 1 || node->inputs().size() != 5 ||
      node->input(1)->type()->kind() != c10::TypeKind::IntType) {
    return false;
  }
  auto type = node->output()->type()->cast<c10::TensorType>();
  return type && type->scalarType() && c10::isFloatingType(*type->scalarType());
}

const torch::jit::Value* columnSumResult(const Node* sum) {
  const auto& uses = sum->output()->uses();
  if (uses.size() == 1 && isFloatingConversion(uses[0].user)) return uses[0].user->output();
  return sum->output();
}

bool rowsAreRuns(const Value* v, int64_t reduced) {
  auto type = v->type()->cast<c10::TensorType>();
  if (!type) return true;
  auto sizes = type->sizes().concrete_sizes();
  auto strides = type->strides().concrete_sizes();
  if (!sizes || !strides || static_cast<int64_t>(sizes->size()) < reduced) return true;
  const int64_t first = static_cast<int64_t>(sizes->size()) - reduced;
  bool runs = true, broadcast = true;
  int64_t expected = 1;
  for (int64_t d = static_cast<int64_t>(sizes->size()) - 1; d >= first; --d) {
    if ((*sizes)[d] == 1) continue;
    runs = runs && (*strides)[d] == expected;
    broadcast = broadcast && (*strides)[d] == 0;
    expected *= (*sizes)[d];
  }
  return runs || broadcast;
}

std::optional<RowReduction> rowReductionOf(const Node* node) {
  const OpEntry* entry = findOp(node);
  if (!entry || !entry->reduces) return std::nullopt;
  auto rank = profiledRank(node->input(0));
  if (!rank || *rank == 0) return std::nullopt;
  if (node->kind() == c10::aten::_grad_sum_to_size) return gradSumReduction(node, *rank);
  RowReduction r;
  r.rank = *rank;
  if (node->kind() == c10::aten::group_norm) {
    // Every dim after the batch, dim 1 split into the groups first.
    auto groups = constantInput(node, "num_groups");
    if (*rank < 2 || !groups || !groups->isInt() || groups->toInt() < 1) return std::nullopt;
    r.reduced = *rank - 1;
    r.groups = groups->toInt();
    return r;
  }
  if (node->kind() == c10::aten::adaptive_avg_pool2d) {  // to one element per channel
    if (*rank < 3) return std::nullopt;
    r.reduced = 2;
    r.result = RowReduction::Result::KeepDims;
    return r;
  }
  const bool whole = node->kind() == c10::aten::softmax || node->kind() == c10::aten::log_softmax ||
                     node->kind() == c10::aten::_softmax_backward_data ||
                     node->kind() == c10::aten::_log_softmax_backward_data ||
                     isShapeNormalization(node) || isLayerNormInputGrad(node);
  std::optional<std::vector<int64_t>> dims;
  if (isShapeNormalization(node) || isLayerNormInputGrad(node)) {
    auto shape = normalizedShapeOf(node);
    if (!shape || shape->empty() || static_cast<int64_t>(shape->size()) > *rank) {
      return std::nullopt;
    }
    dims.emplace();
    for (int64_t d = *rank - static_cast<int64_t>(shape->size()); d < *rank; ++d) {
      dims->push_back(d);
    }
  } else if (reducesEveryDim(node)) {
    dims.emplace();
    for (int64_t d = 0; d < *rank; ++d) dims->push_back(d);
  } else {
    dims = constantIntList(node, "dim");
  }
  if (!dims) return std::nullopt;
  const bool backward = node->kind() == c10::aten::_softmax_backward_data ||
                        node->kind() == c10::aten::_log_softmax_backward_data ||
                        isLayerNormInputGrad(node);
  auto trailing = trailingCount(*dims, *rank);
  if (trailing && whole && !backward && !rowsAreRuns(node->input(0), *trailing)) {
    trailing.reset();
  }
  if (trailing) {
    r.reduced = *trailing;
  } else {
    // Plain reductions may take any dims (each once); so may the normalizations and
    // softmax, but not their backward ops.
    if (backward) return std::nullopt;
    auto any = distinctDims(*dims, *rank);
    if (!any) return std::nullopt;
    r.dims = std::move(*any);
    r.reduced = static_cast<int64_t>(r.dims.size());
  }
  if (whole) {
    r.result = RowReduction::Result::Whole;
  } else {
    // sum(self) and mean(self) drop every dim.
    std::optional<c10::IValue> keepdim = false;
    if (node->schema().argumentIndexWithName("keepdim")) keepdim = constantInput(node, "keepdim");
    if (!keepdim || !keepdim->isBool()) return std::nullopt;
    r.result = keepdim->toBool() ? RowReduction::Result::KeepDims : RowReduction::Result::DropDims;
  }
  return r;
}

bool RowReduction::reduces(int64_t d) const {
  if (dims.empty()) return d >= rank - reduced;
  return std::binary_search(dims.begin(), dims.end(), d);
}

std::vector<int64_t> reducedSizes(const std::vector<int64_t>& input_sizes,
                                  const RowReduction& r) {
  if (r.result == RowReduction::Result::Whole) return input_sizes;
  const int64_t rank = static_cast<int64_t>(input_sizes.size());
  std::vector<int64_t> out;
  for (int64_t d = 0; d < rank; ++d) {
    if (!r.reduces(d - rank + r.rank)) {  // (sizes of another rank align at the last dim)
      out.push_back(input_sizes[d]);
    } else if (r.result == RowReduction::Result::KeepDims) {
      out.push_back(1);
    }
  }
  return out;
}

}  // namespace fuser::ops
