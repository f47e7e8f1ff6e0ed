// splitBatchNormTraining: batch_norm with batch statistics becomes a row reduction, a
// small statistics op and an inference batch_norm that elementwise groups take.
//
// After it runs, each aten::batch_norm (no-grad graphs) and aten::_batch_norm_impl_index
// (autodiff's forward) whose `training` may be True, whose input is a contiguous
// floating tensor of 3 or more dims with running statistics of its computation dtype,
// and whose result a fusible node reads, computes
//   if training:
//     m = mean(x, dims 2..), v = mean((x - m)^2, dims 2..)   (per sample and channel:
//         trailing dims, one row group; x read in float for float16/bfloat16)
//     mean, var = fuser::batch_norm_batch_stats(m, v, x, running_mean, running_var,
//                                               momentum, eps)
//         (combines the rows over the batch, updates the running statistics in place)
//   else:
//     mean, var = running_mean, running_var
//   y = batch_norm(x, weight, bias, mean, var, training=False, momentum, eps)
// so that y is the inference batch_norm the elementwise group after it fuses (with the
// ReLU or residual add that reads it): eager's training forward reads x twice and
// writes y, and so do these kernels, while the activation after it no longer reads y
// again. The branch keeps eval mode as it was (the running statistics, no reduction).
// Autodiff's form also returns what its backward reads: the batch mean and inverse
// standard deviation (empty in eval mode, as ATen's native kernel returns them), an
// empty reserve and backend index 0 (ATen's native backward).
// Left alone: `training` a constant False (the inference path takes it), channels-last
// or other strided inputs (the row kernel reads rows of contiguous trailing dims),
// missing running statistics, 16-bit statistics, and a batch_norm no fusible node reads
// (ATen's own training kernels are as good there).
#include <ATen/ATen.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/runtime/custom_operator.h>

#include <optional>
#include <vector>

#include "passes/fusibility.h"
#include "passes/pipeline.h"
#include "symbols.h"

namespace fuser {
namespace {

using c10::ScalarType;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

// Inputs shared by aten::batch_norm and aten::_batch_norm_impl_index.
enum Input : size_t { kX, kWeight, kBias, kRunningMean, kRunningVar, kTraining, kMomentum, kEps,
                      kCudnn, kInputCount };

bool isTrainingCandidate(const Node* node) {
  return (node->kind() == c10::aten::batch_norm ||
          node->kind() == c10::aten::_batch_norm_impl_index) &&
         node->inputs().size() == kInputCount;
}

// The dtype the statistics are computed in: float for 16-bit inputs, as eager does.
ScalarType statisticsDtype(ScalarType x) {
  return x == ScalarType::Half || x == ScalarType::BFloat16 ? ScalarType::Float : x;
}

// x's profiled type, when it is a contiguous floating tensor of 3 or more dims.
c10::TensorTypePtr contiguousInput(const Value* x) {
  auto type = x->type()->cast<c10::TensorType>();
  if (!type || !type->scalarType() || !c10::isFloatingType(*type->scalarType())) return nullptr;
  auto sizes = type->sizes().concrete_sizes();
  auto strides = type->strides().concrete_sizes();
  if (!sizes || !strides || sizes->size() < 3 || !type->device()) return nullptr;
  if (*strides != c10::TensorType::contiguousStridesOf(*sizes)) return nullptr;
  return type;
}

// Whether `v` is a profiled tensor of dtype `dtype` (running statistics: not None).
bool isTensorOf(const Value* v, ScalarType dtype) {
  auto type = v->type()->cast<c10::TensorType>();
  return type && type->scalarType() == dtype;
}

bool fusibleReaderOf(const Value* y) {
  for (const torch::jit::Use& use : y->uses()) {
    if (checkFusible(use.user)) return true;
  }
  return false;
}

Value* typed(Value* v, c10::TypePtr type) {
  v->setType(std::move(type));
  return v;
}

// The batch statistics of x (see the header): appended where the insertion point is.
// Returns mean, var and, for autodiff's form, the saved mean, inverse standard deviation
// and reserve.
std::vector<Value*> emitBatchStatistics(Graph& graph, Node* bn, const c10::TensorTypePtr& x_type,
                                        bool for_backward) {
  Value* x = bn->input(kX);
  const std::vector<int64_t> sizes = *x_type->sizes().concrete_sizes();
  const ScalarType dtype = statisticsDtype(*x_type->scalarType());
  Value* read = x;
  if (dtype != *x_type->scalarType()) {
    Node* cast = graph.insertNode(graph.create(
        c10::aten::to, {x, graph.insertConstant(static_cast<int64_t>(dtype)),
                        graph.insertConstant(false), graph.insertConstant(false),
                        graph.insertConstant(c10::IValue())}));
    read = typed(cast->output(), x_type->withScalarType(dtype));
  }
  std::vector<int64_t> dims;
  std::vector<int64_t> row_sizes = {sizes[0], sizes[1]};
  for (size_t d = 2; d < sizes.size(); ++d) {
    dims.push_back(static_cast<int64_t>(d));
    row_sizes.push_back(1);
  }
  auto whole = x_type->withScalarType(dtype);
  auto per_row = whole->withSizes(row_sizes);
  Value* dim_list = graph.insertConstant(c10::IValue(dims));
  Value* keep = graph.insertConstant(true);
  Value* none = graph.insertConstant(c10::IValue());
  auto mean_of = [&](Value* v) {
    return typed(graph.insertNode(graph.create(c10::aten::mean, {v, dim_list, keep, none}))->output(),
                 per_row);
  };
  Value* row_mean = mean_of(read);
  Value* one = graph.insertConstant(static_cast<int64_t>(1));
  Value* centred =
      typed(graph.insertNode(graph.create(c10::aten::sub, {read, row_mean, one}))->output(), whole);
  Value* row_var = mean_of(
      typed(graph.insertNode(graph.create(c10::aten::mul, {centred, centred}))->output(), whole));

  Node* stats = graph.insertNode(graph.create(
      for_backward ? batchNormBatchStatsForBackwardSymbol() : batchNormBatchStatsSymbol(),
      {row_mean, row_var, x, bn->input(kRunningMean), bn->input(kRunningVar),
       bn->input(kMomentum), bn->input(kEps)},
      for_backward ? 4 : 2));
  const c10::TypePtr channels = bn->input(kRunningMean)->type();
  typed(stats->output(0), channels);
  typed(stats->output(1), channels);
  if (for_backward) {
    typed(stats->output(2), channels);
    typed(stats->output(3), c10::TensorType::get());
  }
  if (!for_backward) return {stats->output(0), stats->output(1)};
  // What autodiff's backward reads: the saved mean, inverse standard deviation, reserve.
  return {stats->output(0), stats->output(1), stats->output(0), stats->output(2),
          stats->output(3)};
}

// What eval mode gives: the running statistics and, for autodiff's form, ATen's empty
// saved statistics and reserve.
std::vector<Value*> emitRunningStatistics(Graph& graph, Node* bn, bool for_backward) {
  std::vector<Value*> out = {bn->input(kRunningMean), bn->input(kRunningVar)};
  if (for_backward) {
    Node* saves = graph.insertNode(
        graph.create(batchNormEvalSavesSymbol(), {bn->input(kRunningMean)}, 3));
    for (Value* v : saves->outputs()) out.push_back(typed(v, c10::TensorType::get()));
  }
  return out;
}

// Rewrites `bn` (see the header); leaves the graph as it was when the result would not
// fuse.
void rewrite(Node* bn) {
  auto x_type = contiguousInput(bn->input(kX));
  if (!x_type) return;
  const ScalarType dtype = statisticsDtype(*x_type->scalarType());
  if (!isTensorOf(bn->input(kRunningMean), dtype) || !isTensorOf(bn->input(kRunningVar), dtype)) {
    return;
  }
  std::optional<c10::IValue> training = torch::jit::toIValue(bn->input(kTraining));
  if (training && (!training->isBool() || !training->toBool())) return;
  const bool for_backward = bn->kind() == c10::aten::_batch_norm_impl_index;
  if (!fusibleReaderOf(bn->output(0))) return;

  Graph& graph = *bn->owningGraph();
  torch::jit::WithInsertPoint here(bn);
  // The inference batch_norm first, over the running statistics (the statistics below
  // have their types): nothing else is built when it would not fuse.
  Node* eval = graph.insertNode(graph.create(
      batchNormWithStatsSymbol(),
      {bn->input(kX), bn->input(kWeight), bn->input(kBias), bn->input(kRunningMean),
       bn->input(kRunningVar), graph.insertConstant(false), bn->input(kMomentum),
       bn->input(kEps), bn->input(kCudnn)}));
  eval->output()->copyMetadata(bn->output(0));
  if (!checkFusible(eval)) {
    eval->destroy();
    return;
  }
  std::vector<Value*> stats;
  {
  torch::jit::WithInsertPoint before(eval);
  if (training) {
    stats = emitBatchStatistics(graph, bn, x_type, for_backward);
  } else {
    Node* branch = graph.insertNode(graph.create(c10::prim::If, {bn->input(kTraining)}, 0));
    torch::jit::Block* batch = branch->addBlock();
    torch::jit::Block* running = branch->addBlock();
    {
      torch::jit::WithInsertPoint in(batch);
      for (Value* v : emitBatchStatistics(graph, bn, x_type, for_backward)) {
        batch->registerOutput(v);
      }
    }
    {
      torch::jit::WithInsertPoint in(running);
      for (Value* v : emitRunningStatistics(graph, bn, for_backward)) running->registerOutput(v);
    }
    for (Value* v : batch->outputs()) stats.push_back(branch->addOutput()->setType(v->type()));
  }
  }
  eval->replaceInput(kRunningMean, stats[0]);
  eval->replaceInput(kRunningVar, stats[1]);
  bn->output(0)->replaceAllUsesWith(eval->output());
  if (for_backward) {
    for (size_t i = 1; i <= 3; ++i) bn->output(i)->replaceAllUsesWith(stats[i + 1]);
    bn->output(4)->replaceAllUsesWith(graph.insertConstant(static_cast<int64_t>(0)));
  }
  bn->destroy();
}

void rewriteIn(torch::jit::Block* block) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* node = *it++;
    for (torch::jit::Block* sub : node->blocks()) rewriteIn(sub);
    if (isTrainingCandidate(node)) rewrite(node);
  }
}

// The operators, run by the interpreter (they are never fused).

// Per channel: the mean of the row means, and the mean of the row variances plus the
// variance of the row means (every row holds as many elements), both over the batch.
std::pair<at::Tensor, at::Tensor> combineRows(const at::Tensor& row_mean,
                                              const at::Tensor& row_var, int64_t samples,
                                              int64_t channels) {
  auto means = row_mean.reshape({samples, channels});
  auto [between, mean] = at::var_mean(means, {0}, /*correction=*/0, /*keepdim=*/false);
  at::Tensor var = row_var.reshape({samples, channels}).mean(0).add_(between);
  return {mean, var};
}

// Eager's update: running = (1 - momentum) * running + momentum * batch, the variance
// unbiased over the batch's elements per channel.
void updateRunning(at::Tensor& running_mean, at::Tensor& running_var, const at::Tensor& mean,
                   const at::Tensor& var, double momentum, int64_t count) {
  at::NoGradGuard no_grad;
  const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
  running_mean.mul_(1.0 - momentum).add_(mean, momentum);
  running_var.mul_(1.0 - momentum).add_(var, momentum * unbias);
}

void batchStatistics(torch::jit::Stack& stack, bool for_backward) {
  const double eps = torch::jit::pop(stack).toDouble();
  const double momentum = torch::jit::pop(stack).toDouble();
  at::Tensor running_var = torch::jit::pop(stack).toTensor();
  at::Tensor running_mean = torch::jit::pop(stack).toTensor();
  const at::Tensor x = torch::jit::pop(stack).toTensor();
  const at::Tensor row_var = torch::jit::pop(stack).toTensor();
  const at::Tensor row_mean = torch::jit::pop(stack).toTensor();
  const int64_t samples = x.size(0);
  const int64_t channels = x.size(1);
  auto [mean, var] = combineRows(row_mean.to(running_mean.scalar_type()),
                                 row_var.to(running_mean.scalar_type()), samples, channels);
  updateRunning(running_mean, running_var, mean, var, momentum, x.numel() / channels);
  torch::jit::push(stack, mean, var);
  if (for_backward) {
    torch::jit::push(stack, (var + eps).rsqrt(), at::empty({0}, x.options().dtype(at::kByte)));
  }
}

// The inference formula over the given statistics, in ATen ops that autograd sees
// through (a fallback that runs with gradients on differentiates the batch statistics).
void normalizeWithStats(torch::jit::Stack& stack) {
  torch::jit::drop(stack, 1);  // cudnn_enabled
  const double eps = torch::jit::pop(stack).toDouble();
  torch::jit::drop(stack, 1);  // momentum
  const bool training = torch::jit::pop(stack).toBool();
  const std::optional<at::Tensor> var = torch::jit::pop(stack).toOptional<at::Tensor>();
  const std::optional<at::Tensor> mean = torch::jit::pop(stack).toOptional<at::Tensor>();
  const std::optional<at::Tensor> bias = torch::jit::pop(stack).toOptional<at::Tensor>();
  const std::optional<at::Tensor> weight = torch::jit::pop(stack).toOptional<at::Tensor>();
  const at::Tensor x = torch::jit::pop(stack).toTensor();
  TORCH_CHECK(!training && mean && var,
              "fuser::batch_norm_with_stats takes statistics, with training False");
  std::vector<int64_t> per_channel(static_cast<size_t>(x.dim()), 1);
  per_channel[1] = x.size(1);
  auto channels = [&](const at::Tensor& t) { return t.reshape(per_channel); };
  at::Tensor y = (x - channels(*mean)) * channels((*var + eps).rsqrt());
  if (weight) y = y * channels(*weight);
  if (bias) y = y + channels(*bias);
  torch::jit::push(stack, y.to(x.scalar_type()));
}

void evalSaves(torch::jit::Stack& stack) {
  const at::Tensor running_mean = torch::jit::pop(stack).toTensor();
  torch::jit::push(stack, at::empty({0}, running_mean.options()),
                   at::empty({0}, running_mean.options()),
                   at::empty({0}, running_mean.options().dtype(at::kByte)));
}

torch::jit::RegisterOperators registration({
    torch::jit::Operator(
        "fuser::batch_norm_batch_stats(Tensor row_mean, Tensor row_var, Tensor input, "
        "Tensor(a!) running_mean, Tensor(b!) running_var, float momentum, float eps) -> "
        "(Tensor, Tensor)",
        [](torch::jit::Stack& stack) { batchStatistics(stack, false); },
        c10::AliasAnalysisKind::FROM_SCHEMA),
    torch::jit::Operator(
        "fuser::batch_norm_batch_stats_for_backward(Tensor row_mean, Tensor row_var, "
        "Tensor input, Tensor(a!) running_mean, Tensor(b!) running_var, float momentum, "
        "float eps) -> (Tensor, Tensor, Tensor, Tensor)",
        [](torch::jit::Stack& stack) { batchStatistics(stack, true); },
        c10::AliasAnalysisKind::FROM_SCHEMA),
    torch::jit::Operator(
        "fuser::batch_norm_with_stats(Tensor input, Tensor? weight, Tensor? bias, Tensor? mean, "
        "Tensor? var, bool training, float momentum, float eps, bool cudnn_enabled) -> Tensor",
        normalizeWithStats, c10::AliasAnalysisKind::FROM_SCHEMA),
    torch::jit::Operator("fuser::batch_norm_eval_saves(Tensor running_mean) -> "
                         "(Tensor, Tensor, Tensor)",
                         evalSaves, c10::AliasAnalysisKind::FROM_SCHEMA),
});

}  // namespace

void splitBatchNormTraining(GraphPtr& graph) { rewriteIn(graph->block()); }

}  // namespace fuser
