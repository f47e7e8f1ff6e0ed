// splitBatchNormTraining: batch_norm with batch statistics becomes a row reduction, a
// small statistics op and an inference batch_norm that elementwise groups take.
//
// After it runs, each aten::batch_norm (no-grad graphs) and aten::_batch_norm_impl_index
// (autodiff's forward) whose `training` may be True, whose input is a contiguous
// floating tensor of 3 or more dims with running statistics of its computation dtype or
// of its own 16-bit dtype (a model made float16 or bfloat16 whole), and whose result a
// fusible node reads, computes
//   t = promote_types(dtype(x), float)   (the computation dtype: float for 16-bit x)
//   if training:
//     m = mean(x.to(t), dims 2..), v = var(x.to(t), dims 2.., correction=0)   (per sample
//         and channel: trailing dims, one row group)
//     mean, var = fuser::batch_norm_batch_stats(m, v, x, running_mean, running_var,
//                                               momentum, eps)
//         (combines the rows over the batch, updates the running statistics in place)
//   else:
//     mean, var = running_mean.to(t), running_var.to(t)
//   y = batch_norm_with_stats(x, weight, bias, mean, var, training=False, momentum, eps)
// so that y is the inference batch_norm the elementwise group after it fuses (with the
// ReLU or residual add that reads it): eager's training forward reads x twice and
// writes y, and so do these kernels, while the activation after it no longer reads y
// again. The branch keeps eval mode as it was (the running statistics, no reduction).
// The batch statistics are in the computation dtype, as eager's CUDA kernels keep them;
// 16-bit running statistics are updated in it and rounded once. t is computed at run
// time (the guards of the groups reading it pin it to the profiled dtype), so a model
// whose dtype changes after profiling still normalizes in its own computation dtype.
// Autodiff's form also returns what its backward reads: the batch mean and inverse
// standard deviation (empty in eval mode: CPU's native kernel returns them so, and
// CUDA's backward recomputes them from the running statistics when they are empty), of
// the dtype ATen's backward takes on the device (savedStatisticsDtype, in
// runtime/batch_norm_statistics.cpp), an empty reserve and backend index 0 (ATen's
// native backward).
// The three fuser:: operators run in the interpreter (runtime/batch_norm_statistics.h).
// Left alone: `training` a constant False (the inference path takes it), channels-last
// or other strided inputs (the row kernel reads rows of contiguous trailing dims),
// missing running statistics, and a batch_norm no fusible node reads
// (ATen's own training kernels are as good there).
#include <torch/csrc/jit/ir/constants.h>

#include <optional>
#include <vector>

#include "ops/batch_norm.h"
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

// The dtype of the running statistics `v` when the rewrite takes it: a profiled tensor
// (not None) of a dtype eager takes beside x's (x's own, or float beside 16 bits).
std::optional<ScalarType> runningDtype(const Value* v, ScalarType x) {
  auto type = v->type()->cast<c10::TensorType>();
  if (!type || !type->scalarType() || !ops::statisticsDtypeFits(*type->scalarType(), x)) {
    return std::nullopt;
  }
  return *type->scalarType();
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

// aten::to(v, dtype), appended where the insertion point is, typed as `type`: v itself
// where it has that dtype.
Value* aliasingConversion(Graph& graph, Value* v, Value* dtype, c10::TypePtr type) {
  Node* cast = graph.create(c10::aten::to, {v, dtype, graph.insertConstant(false),
                                            graph.insertConstant(false),
                                            graph.insertConstant(c10::IValue())});
  return typed(graph.insertNode(cast)->output(), std::move(type));
}

// aten::_to_copy(v, dtype=dtype): as aliasingConversion, but a fresh tensor whatever the
// dtype, so that the group reading it takes the conversion (an alias of a graph input,
// which may alias the running statistics written in place, would stay out of groups).
Value* freshConversion(Graph& graph, Value* v, Value* dtype, c10::TypePtr type) {
  Value* none = graph.insertConstant(c10::IValue());
  Node* copy = graph.create(c10::aten::_to_copy,
                            {v, dtype, none, none, none, graph.insertConstant(false), none});
  return typed(graph.insertNode(copy)->output(), std::move(type));
}

// x's computation dtype at run time, promote_types(dtype(x), float): float for float16
// and bfloat16, x's own for float and double.
Value* computationDtypeOf(Graph& graph, Value* x) {
  Value* dtype = graph.insertNode(graph.create(c10::prim::dtype, {x}))->output();
  Node* promoted = graph.create(
      c10::aten::promote_types,
      {typed(dtype, c10::IntType::get()),
       graph.insertConstant(static_cast<int64_t>(ScalarType::Float))});
  return typed(graph.insertNode(promoted)->output(), c10::IntType::get());
}

// The statistics' per-channel type: the running mean's, in the computation dtype.
c10::TypePtr channelType(const Node* bn, ScalarType dtype) {
  return bn->input(kRunningMean)->type()->expectRef<c10::TensorType>().withScalarType(dtype);
}

// The batch statistics of x (see the header): appended where the insertion point is.
// Returns mean, var and, for autodiff's form, the saved mean, inverse standard deviation
// and reserve.
std::vector<Value*> emitBatchStatistics(Graph& graph, Node* bn, const c10::TensorTypePtr& x_type,
                                        Value* computation_dtype, bool for_backward) {
  Value* x = bn->input(kX);
  const std::vector<int64_t> sizes = *x_type->sizes().concrete_sizes();
  const ScalarType dtype = statisticsDtype(*x_type->scalarType());
  auto whole = x_type->withScalarType(dtype);
  Value* read = freshConversion(graph, x, computation_dtype, whole);
  std::vector<int64_t> dims;
  std::vector<int64_t> row_sizes = {sizes[0], sizes[1]};
  for (size_t d = 2; d < sizes.size(); ++d) {
    dims.push_back(static_cast<int64_t>(d));
    row_sizes.push_back(1);
  }
  auto per_row = whole->withSizes(row_sizes);
  Value* dim_list = graph.insertConstant(c10::IValue(dims));
  Value* keep = graph.insertConstant(true);
  // var_mean.correction(x, dims, correction=0, keepdim=True): one group's statistics, two
  // passes over a row, or one where CUDA walks it from memory (Welford's triple, as
  // eager's CUDA statistics), the mean exact on a channel of equal values.
  Value* zero = graph.insertConstant(static_cast<int64_t>(0));
  Node* moments =
      graph.insertNode(graph.create(c10::aten::var_mean, {read, dim_list, zero, keep}, 2));
  Value* row_var = typed(moments->output(0), per_row);
  Value* row_mean = typed(moments->output(1), per_row);

  Node* stats = graph.insertNode(graph.create(
      for_backward ? batchNormBatchStatsForBackwardSymbol() : batchNormBatchStatsSymbol(),
      {row_mean, row_var, x, bn->input(kRunningMean), bn->input(kRunningVar),
       bn->input(kMomentum), bn->input(kEps)},
      for_backward ? 5 : 2));
  typed(stats->output(0), channelType(bn, dtype));
  typed(stats->output(1), channelType(bn, dtype));
  if (!for_backward) return {stats->output(0), stats->output(1)};
  // What autodiff's backward reads: the saved mean and inverse standard deviation (their
  // dtype is the device's, known at run time), the reserve.
  for (size_t i = 2; i < 5; ++i) typed(stats->output(i), c10::TensorType::get());
  return {stats->output(0), stats->output(1), stats->output(2), stats->output(3),
          stats->output(4)};
}

// What eval mode gives: the running statistics and, for autodiff's form, ATen's empty
// saved statistics and reserve.
std::vector<Value*> emitRunningStatistics(Graph& graph, Node* bn, ScalarType dtype,
                                          Value* computation_dtype, bool for_backward) {
  std::vector<Value*> out;
  for (Value* running : {bn->input(kRunningMean), bn->input(kRunningVar)}) {
    out.push_back(aliasingConversion(graph, running, computation_dtype, channelType(bn, dtype)));
  }
  if (for_backward) {
    Node* saves = graph.insertNode(
        graph.create(batchNormEvalSavesSymbol(), {bn->input(kRunningMean)}, 3));
    for (Value* v : saves->outputs()) out.push_back(typed(v, c10::TensorType::get()));
  }
  return out;
}

// The statistics the normalization reads, inserted before `before`: the batch's where
// `training` is a constant True, else a branch on it between the batch's and the
// running ones.
std::vector<Value*> emitStatistics(Graph& graph, Node* bn, Node* before,
                                   const c10::TensorTypePtr& x_type, bool constant_training,
                                   bool for_backward) {
  torch::jit::WithInsertPoint at(before);
  Value* computation_dtype = computationDtypeOf(graph, bn->input(kX));
  if (constant_training) {
    return emitBatchStatistics(graph, bn, x_type, computation_dtype, for_backward);
  }
  Node* branch = graph.insertNode(graph.create(c10::prim::If, {bn->input(kTraining)}, 0));
  torch::jit::Block* batch = branch->addBlock();
  torch::jit::Block* running = branch->addBlock();
  {
    torch::jit::WithInsertPoint in(batch);
    for (Value* v : emitBatchStatistics(graph, bn, x_type, computation_dtype, for_backward)) {
      batch->registerOutput(v);
    }
  }
  {
    torch::jit::WithInsertPoint in(running);
    const ScalarType dtype = statisticsDtype(*x_type->scalarType());
    for (Value* v : emitRunningStatistics(graph, bn, dtype, computation_dtype, for_backward)) {
      running->registerOutput(v);
    }
  }
  std::vector<Value*> stats;
  for (Value* v : batch->outputs()) stats.push_back(branch->addOutput()->setType(v->type()));
  return stats;
}

// Rewrites `bn` (see the header); leaves the graph as it was when the result would not
// fuse.
void rewrite(Node* bn) {
  auto x_type = contiguousInput(bn->input(kX));
  if (!x_type) return;
  const ScalarType x_dtype = *x_type->scalarType();
  const auto running = runningDtype(bn->input(kRunningMean), x_dtype);
  if (!running || running != runningDtype(bn->input(kRunningVar), x_dtype)) return;
  std::optional<c10::IValue> training = torch::jit::toIValue(bn->input(kTraining));
  if (training && (!training->isBool() || !training->toBool())) return;
  const bool for_backward = bn->kind() == c10::aten::_batch_norm_impl_index;
  if (!fusibleReaderOf(bn->output(0))) return;

  Graph& graph = *bn->owningGraph();
  torch::jit::WithInsertPoint here(bn);
  // The normalization first, over the running statistics (the statistics below have
  // their types): nothing else is built when it would not fuse.
  Node* normalize = graph.insertNode(graph.create(
      batchNormWithStatsSymbol(),
      {bn->input(kX), bn->input(kWeight), bn->input(kBias), bn->input(kRunningMean),
       bn->input(kRunningVar), graph.insertConstant(false), bn->input(kMomentum),
       bn->input(kEps), bn->input(kCudnn)}));
  normalize->output()->copyMetadata(bn->output(0));
  if (!checkFusible(normalize)) {
    normalize->destroy();
    return;
  }
  const std::vector<Value*> stats =
      emitStatistics(graph, bn, normalize, x_type, training.has_value(), for_backward);
  normalize->replaceInput(kRunningMean, stats[0]);
  normalize->replaceInput(kRunningVar, stats[1]);
  bn->output(0)->replaceAllUsesWith(normalize->output());
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

}  // namespace

void splitBatchNormTraining(GraphPtr& graph) { rewriteIn(graph->block()); }

}  // namespace fuser
