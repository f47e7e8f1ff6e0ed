// poolBeforeMonotoneOps: a max pool reads the value its monotone epilogue was computed
// from, and the epilogue runs on the pooled value.
//
// For a non-decreasing f, max over a window of f(x_i) equals f(max of the x_i), so
// `max_pool(relu(conv(x) + bias))` computes the same values as
// `relu(max_pool(conv(x)) + bias)`, and the second form runs its elementwise work on the
// pooled size (a quarter for 2x2 or 3x3/2 pools): the full-size epilogue, its write and
// the pool's read of it disappear. ResNet's stem (conv, folded BatchNorm's bias, ReLU,
// 3x3/2 max pool) and VGG's blocks are of this form.
//
// After it runs, each aten::max_pool1d/2d/3d whose input is computed by a chain of
// fusible non-decreasing ops (relu, relu6, hardtanh, clamp, clamp_min, clamp_max,
// hardsigmoid, leaky_relu with a positive slope, the add/sub of a constant, mul/div by
// a positive constant), each read by the chain alone, starting from a value no fusible
// node computes, reads the chain's start instead, and a copy of the chain reads its
// result. The rewrite is exact in floating point, not only in real numbers: rounding
// is monotone, every value is floating point, every constant operand is finite (and so
// is alpha times it) and the same across each window (broadcast over the pooled dims),
// so no op makes a NaN the other order would not, and NaN inputs propagate through both
// orders. Left alone: graphs that need gradients (the pool's gradient picks one of tied
// maxima, and the orders tie differently), max_pool*_with_indices (indices of tied
// maxima differ), non-constant operands, and chains that would not leave a group (a
// fusible producer would keep the full-size pass anyway). FUSER_POOL_FIRST=0 turns it
// off.
#include <ATen/ATen.h>
#include <torch/csrc/jit/ir/constants.h>

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "config.h"
#include "passes/fusibility.h"
#include "passes/pipeline.h"
#include "runtime/cuda/stream_capture.h"

namespace fuser {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// Trailing dims a pool takes its windows over; nullopt for other nodes (the
// *_with_indices forms are other kinds).
std::optional<int64_t> pooledDims(const Node* node) {
  if (node->kind() == c10::aten::max_pool1d) return 1;
  if (node->kind() == c10::aten::max_pool2d) return 2;
  if (node->kind() == c10::aten::max_pool3d) return 3;
  return std::nullopt;
}

std::optional<double> finiteScalar(const Value* v) {
  auto constant = torch::jit::toIValue(v);
  if (!constant || !(constant->isDouble() || constant->isInt())) return std::nullopt;
  const double x = constant->toScalar().toDouble();
  if (!std::isfinite(x)) return std::nullopt;
  return x;
}

// A constant operand the same across every window of `dims` trailing dims, that times
// `scale` is finite in float (so that x + scale * c meets no infinity of its own): a
// scalar, or a constant tensor of size 1 in those dims.
bool constantAcrossWindows(const Value* v, int64_t dims, double scale = 1.0) {
  const double largest = std::numeric_limits<float>::max();
  if (auto x = finiteScalar(v)) return std::abs(*x * scale) < largest;
  auto constant = torch::jit::toIValue(v);
  if (!constant || !constant->isTensor()) return false;
  const at::Tensor& t = constant->toTensor();
  for (int64_t d = 1; d <= dims && d <= t.dim(); ++d) {
    if (t.size(-d) != 1) return false;
  }
  // Reading a GPU constant's values synchronizes, which a CUDA graph's capture forbids.
  if (t.numel() == 0 || cuda::currentStreamCapturing(t.device())) return false;
  if (!at::isfinite(t).all().item<bool>()) return false;
  return std::abs(t.abs().max().item<double>() * scale) < largest;
}

bool positiveScalar(const Value* v) {
  auto x = finiteScalar(v);
  return x && *x > 0;
}

// The input through which `node` is a non-decreasing function of one value, its other
// operands constant across the windows; nullopt when it is not such an op.
std::optional<size_t> monotoneOperand(const Node* node, int64_t dims) {
  if (node->matches("aten::relu(Tensor self) -> Tensor") ||
      node->matches("aten::relu6(Tensor self) -> Tensor") ||
      node->matches("aten::hardsigmoid(Tensor self) -> Tensor")) {
    return 0;
  }
  if (node->matches("aten::hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor") ||
      node->matches("aten::clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor")) {
    for (size_t i : {1, 2}) {
      auto bound = torch::jit::toIValue(node->input(i));
      if (!bound || (!bound->isNone() && !finiteScalar(node->input(i)))) return std::nullopt;
    }
    return 0;
  }
  if (node->matches("aten::clamp_min(Tensor self, Scalar min) -> Tensor") ||
      node->matches("aten::clamp_max(Tensor self, Scalar max) -> Tensor")) {
    if (!finiteScalar(node->input(1))) return std::nullopt;
    return 0;
  }
  if (node->matches("aten::leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor")) {
    if (!positiveScalar(node->input(1))) return std::nullopt;  // -inf * 0 is NaN
    return 0;
  }
  // x + alpha * c and x - alpha * c for any finite alpha; c + alpha * x for alpha > 0.
  const bool add = node->matches("aten::add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor") ||
                   node->matches("aten::add(Tensor self, Scalar other, Scalar alpha=1) -> Tensor");
  const bool sub = node->matches("aten::sub(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor") ||
                   node->matches("aten::sub(Tensor self, Scalar other, Scalar alpha=1) -> Tensor");
  if (add || sub) {
    auto alpha = finiteScalar(node->input(2));
    if (!alpha) return std::nullopt;
    if (constantAcrossWindows(node->input(1), dims, *alpha)) return 0;
    if (add && *alpha > 0 && constantAcrossWindows(node->input(0), dims)) return 1;
    return std::nullopt;
  }
  // x * c and x / c for a constant scalar c > 0 (a tensor's sign is not checked).
  if (node->matches("aten::mul(Tensor self, Tensor other) -> Tensor") ||
      node->matches("aten::mul(Tensor self, Scalar other) -> Tensor")) {
    if (positiveScalar(node->input(1))) return 0;
    if (positiveScalar(node->input(0))) return 1;
    return std::nullopt;
  }
  if (node->matches("aten::div(Tensor self, Tensor other) -> Tensor") ||
      node->matches("aten::div(Tensor self, Scalar other) -> Tensor")) {
    if (positiveScalar(node->input(1))) return 0;
  }
  return std::nullopt;
}

// Floating point values only: integer arithmetic wraps around, which is not monotone.
bool floatingValue(const Value* v) {
  auto type = v->type()->cast<c10::TensorType>();
  return type && type->scalarType() && c10::isFloatingType(*type->scalarType());
}

bool needsNoGradient(const Value* v) {
  auto type = v->type()->cast<c10::TensorType>();
  return type && type->requiresGrad().has_value() && !*type->requiresGrad();
}

bool sameSizes(const Value* a, const Value* b) {
  auto ta = a->type()->cast<c10::TensorType>();
  auto tb = b->type()->cast<c10::TensorType>();
  if (!ta || !tb) return false;
  auto sa = ta->sizes().concrete_sizes();
  auto sb = tb->sizes().concrete_sizes();
  return sa && sb && *sa == *sb;
}

// One step of the chain: the node computing `v`, if it is a fusible monotone op of its
// operand of `v`'s size, read by nothing else, needing no gradient.
struct Step {
  Node* node;
  size_t operand;
};

std::optional<Step> monotoneProducer(Value* v, int64_t dims, const torch::jit::Block* block) {
  Node* node = v->node();
  if (node->owningBlock() != block || v->uses().size() != 1 || !needsNoGradient(v) ||
      !floatingValue(v) || !checkFusible(node)) {
    return std::nullopt;
  }
  std::optional<size_t> operand = monotoneOperand(node, dims);
  if (!operand || !sameSizes(node->input(*operand), v) ||
      !needsNoGradient(node->input(*operand)) || !floatingValue(node->input(*operand))) {
    return std::nullopt;
  }
  return Step{node, *operand};
}

// The chain computing the pool's input, nearest the pool first; empty when moving it
// would not take its full-size pass away.
std::vector<Step> monotoneChain(Node* pool, int64_t dims) {
  std::vector<Step> chain;
  Value* v = pool->input(0);
  while (auto step = monotoneProducer(v, dims, pool->owningBlock())) {
    chain.push_back(*step);
    v = step->node->input(step->operand);
  }
  if (!chain.empty() && checkFusible(v->node())) {
    chain.clear();  // its fusible producer would write the full-size value anyway
  }
  return chain;
}

c10::TypePtr pooledType(const Value* pooled, const Value* like) {
  auto type = pooled->type()->expect<c10::TensorType>();
  return type->withScalarType(like->type()->expect<c10::TensorType>()->scalarType());
}

void moveChain(torch::jit::Graph& graph, Node* pool, const std::vector<Step>& chain) {
  Value* start = chain.back().node->input(chain.back().operand);
  torch::jit::WithInsertPoint point(pool);
  Node* first = graph.insertNode(graph.createClone(pool, [&](Value* v) {
    return v == pool->input(0) ? start : v;
  }));
  first->output()->setType(pooledType(pool->output(), start));
  Value* result = first->output();
  for (auto step = chain.rbegin(); step != chain.rend(); ++step) {
    Node* copy = graph.insertNode(graph.createClone(step->node, [&](Value* v) {
      return v == step->node->input(step->operand) ? result : v;
    }));
    copy->output()->setType(pooledType(pool->output(), step->node->output()));
    result = copy->output();
  }
  pool->output()->replaceAllUsesWith(result);
  pool->destroy();
  for (const Step& step : chain) step.node->destroy();  // nearest the pool first
}

void rewriteBlock(torch::jit::Graph& graph, torch::jit::Block* block) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* node = *it++;
    for (torch::jit::Block* sub : node->blocks()) rewriteBlock(graph, sub);
    std::optional<int64_t> dims = pooledDims(node);
    if (!dims) continue;  // (the chain's values are checked to need no gradient)
    std::vector<Step> chain = monotoneChain(node, *dims);
    if (!chain.empty()) moveChain(graph, node, chain);
  }
}

}  // namespace

void poolBeforeMonotoneOps(GraphPtr& graph) {
  if (config().pool_first) rewriteBlock(*graph, graph->block());
}

}  // namespace fuser
