// hoistLoopInvariantProjections: a recurrent layer's input projection as one GEMM.
//
// A scripted RNN layer multiplies each time step of its input by the same weight:
// `for t in range(x.size(0)): ... x[t] @ w.t() ...`. Those T small GEMMs cost more than one
// GEMM over all steps, which keeps the weight in cache while it streams every row (on a
// 2-core CPU, 100 steps of (64 x 512) @ (512 x 2048) take 0.75x the time as one call).
// This is the "input GEMM for all time steps" of cuDNN's and oneDNN's RNN primitives.
//
// After it runs, a matmul (or mm) of `select(X, 0, i)` by `W` (or by `t(W)`), sitting
// unconditionally in a loop's body, where X and W come from outside the loop and are
// never written, reads `select(P, 0, i)` instead, with P = matmul(X, W) computed once
// before the loop. P is computed only when the loops that read it do at least as many
// of these GEMMs as X has rows, give or take the few of an unrolled loop's tail:
// - the loop runs `X.size(0)` times; or
// - it runs `X.size(0) // U` times with at least U such GEMMs per body (UnrollLoops's
//   main loop), and then also its remainder loop, `X.size(0) - X.size(0) // U * U`
//   trips, reads the same P.
// P sits in `prim::If(X.size(0) > 0)`: a loop that runs no step computes nothing, so
// no error can come earlier than it would have (see insertWholeProduct for X of rank 1). matmul(X, W)[i] == matmul(X[i], W) for
// any X of rank >= 2 and W of rank 2, so the rewrite changes no result beyond the
// rounding of a differently blocked GEMM. FUSER_HOIST=0 turns the stage off (P holds
// T times one step's product: memory traded for time).
#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/constants.h>

#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "config.h"
#include "passes/pipeline.h"

namespace fuser {
namespace {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

std::optional<int64_t> constantInt(const Value* v) { return torch::jit::constant_as<int64_t>(v); }

bool isConstantTrue(const Value* v) { return torch::jit::constant_as<bool>(v) == true; }

// Whether `v` is computed outside `loop` (a graph input, or a node in no block of it).
bool definedOutside(const Value* v, const Node* loop) {
  for (const Node* n = v->node(); n != nullptr; n = n->owningBlock()->owningNode()) {
    if (n == loop) return false;
  }
  return true;
}

// A step's rows (rank >= 1; exactly 2 for mm) times a matrix, both of one known dtype
// and device, so the whole product fails where the steps would and nowhere else.
bool operandsAgree(const Value* rows, const Value* weight, bool is_mm) {
  auto r = rows->type()->cast<c10::TensorType>();
  auto w = weight->type()->cast<c10::TensorType>();
  if (!r || !w || !r->dim() || !r->scalarType() || !r->device()) return false;
  if (*r->dim() < 1 || (is_mm && *r->dim() != 2) || w->dim() != 2) return false;
  return w->scalarType() == r->scalarType() && w->device() == r->device();
}

// `X.size(0)`: the node `aten::size(X, 0)`.
bool isSizeOfFirstDim(const Value* v, const Value* x) {
  const Node* n = v->node();
  return n->kind() == c10::aten::size && n->inputs().size() == 2 && n->input(0) == x &&
         constantInt(n->input(1)) == 0;
}

// `n // U` with a constant U > 0, as UnrollLoops writes it; returns U.
std::optional<int64_t> unrollFactor(const Value* trips, const Value* x) {
  static const c10::Symbol floordiv = c10::Symbol::fromQualString("aten::__round_to_zero_floordiv");
  const Node* n = trips->node();
  if (n->kind() != floordiv || !isSizeOfFirstDim(n->input(0), x)) return std::nullopt;
  std::optional<int64_t> u = constantInt(n->input(1));
  if (!u || *u <= 0) return std::nullopt;
  return u;
}

// `n - n // U * U`: the trips of UnrollLoops's remainder loop.
bool isUnrollRemainder(const Value* trips, const Value* x) {
  const Node* sub = trips->node();
  if (sub->kind() != c10::aten::sub || sub->inputs().size() != 2 ||
      !isSizeOfFirstDim(sub->input(0), x)) {
    return false;
  }
  const Node* mul = sub->input(1)->node();
  if (mul->kind() != c10::aten::mul || mul->inputs().size() != 2) return false;
  for (int i = 0; i < 2; ++i) {
    std::optional<int64_t> u = unrollFactor(mul->input(i), x);
    if (u && constantInt(mul->input(1 - i)) == *u) return true;
  }
  return false;
}

// One step's projection inside a loop: `matmul(select(x, 0, index), weight)`, where the
// weight is `w` itself or, when `transposed`, an `aten::t(w)` made in the loop.
struct StepProjection {
  Node* matmul;
  Value* x;
  Value* w;
  bool transposed;
  Value* index;
};

using ProjectionKey = std::tuple<Value*, Value*, bool>;  // (x, w, transposed)

ProjectionKey keyOf(const StepProjection& p) { return {p.x, p.w, p.transposed}; }

std::optional<StepProjection> matchStepProjection(Node* node, const Node* loop,
                                                  const torch::jit::AliasDb& alias_db) {
  const bool is_mm = node->kind() == c10::aten::mm;
  if ((!is_mm && node->kind() != c10::aten::matmul) || node->inputs().size() != 2) {
    return std::nullopt;
  }
  Node* select = node->input(0)->node();
  if (select->kind() != c10::aten::select || select->inputs().size() != 3 ||
      constantInt(select->input(1)) != 0) {
    return std::nullopt;
  }
  StepProjection p{node, select->input(0), node->input(1), false, select->input(2)};
  if (!definedOutside(p.w, loop)) {
    Node* t = p.w->node();
    if (t->kind() != c10::aten::t || t->owningBlock() != node->owningBlock()) return std::nullopt;
    p.w = t->input(0);
    p.transposed = true;
  }
  if (!definedOutside(p.x, loop) || !definedOutside(p.w, loop)) return std::nullopt;
  if (!operandsAgree(select->output(), node->input(1), is_mm)) return std::nullopt;
  if (alias_db.hasWriters(p.x) || alias_db.hasWriters(p.w)) return std::nullopt;
  return p;
}

// The step projections of `loop`'s body that run on every trip.
std::vector<StepProjection> stepProjections(Node* loop, const torch::jit::AliasDb& alias_db) {
  std::vector<StepProjection> found;
  for (Node* node : loop->blocks()[0]->nodes()) {
    if (auto p = matchStepProjection(node, loop, alias_db)) found.push_back(*p);
  }
  return found;
}

// Every GEMM of `loop` whose whole product may be computed before it: the loop's trip
// count must be `x.size(0)`, or `x.size(0) // U` with U of them per body, or the
// remainder of an unrolled loop whose product is already `known`.
std::vector<StepProjection> hoistable(Node* loop, const std::vector<StepProjection>& steps,
                                      const std::set<ProjectionKey>& known) {
  std::map<ProjectionKey, int64_t> per_body;
  for (const StepProjection& p : steps) per_body[keyOf(p)]++;
  std::vector<StepProjection> out;
  Value* trips = loop->input(0);
  for (const StepProjection& p : steps) {
    const bool covered = isSizeOfFirstDim(trips, p.x) ||
                         unrollFactor(trips, p.x).value_or(INT64_MAX) <= per_body[keyOf(p)] ||
                         (known.count(keyOf(p)) && isUnrollRemainder(trips, p.x));
    if (covered) out.push_back(p);
  }
  return out;
}

// `cond ? then() : otherwise()` as a prim::If at the insertion point.
template <typename Then, typename Otherwise>
Value* insertIf(Graph* graph, Value* cond, Then then, Otherwise otherwise) {
  Node* branch = graph->insertNode(graph->create(c10::prim::If, {cond}, 1));
  branch->output()->setType(c10::TensorType::get());
  Block* then_block = branch->addBlock();
  Block* else_block = branch->addBlock();
  {
    torch::jit::WithInsertPoint in_then(then_block);
    then_block->registerOutput(then());
  }
  torch::jit::WithInsertPoint in_else(else_block);
  else_block->registerOutput(otherwise());
  return branch->output();
}

// Before `loop`, with W' = W or t(W):
//   P = X.size(0) == 0 ? X : X.dim() >= 2 ? matmul(X, W') : matmul(X[0], W').
// No rows: P is never read, as no step selects from it. X of rank 1 (a function
// profiled with more, called with a vector): step 0's own matmul of a 0-d row raises
// eager's error, where matmul(X, W') could succeed and give wrong rows.
Value* insertWholeProduct(Node* loop, const StepProjection& p) {
  Graph* graph = loop->owningGraph();
  torch::jit::WithInsertPoint before_loop(loop);
  Value* any_rows = graph->insert(c10::aten::gt, {graph->insert(c10::aten::size, {p.x, 0}), 0});
  return insertIf(
      graph, any_rows,
      [&] {
        Value* w = p.transposed ? graph->insert(c10::aten::t, {p.w}) : p.w;
        Value* matrix_rows = graph->insert(c10::aten::ge, {graph->insert(c10::aten::dim, {p.x}), 2});
        return insertIf(
            graph, matrix_rows, [&] { return graph->insert(c10::aten::matmul, {p.x, w}); },
            [&] {
              Value* first = graph->insert(c10::aten::select, {p.x, 0, 0});
              return graph->insert(c10::aten::matmul, {first, w});
            });
      },
      [&] { return p.x; });
}

// `matmul(select(X, 0, i), W')` in the loop becomes `select(P, 0, i)`.
void readStepFromProduct(const StepProjection& p, Value* product) {
  Graph* graph = p.matmul->owningGraph();
  torch::jit::WithInsertPoint at_step(p.matmul);
  Value* step = graph->insert(c10::aten::select, {product, 0, p.index});
  step->setType(p.matmul->output()->type());
  p.matmul->output()->replaceAllUsesWith(step);
  Node* rows = p.matmul->input(0)->node();
  Node* weight = p.matmul->input(1)->node();
  p.matmul->destroy();
  // The step's own select and transpose, unless something else reads them.
  if (!rows->hasUses()) rows->destroy();
  if (p.transposed && !weight->hasUses()) weight->destroy();
}

// A loop and the step projections to read from whole products made before it.
struct LoopRewrite {
  Node* loop;
  std::vector<StepProjection> steps;
};

// Decides every rewrite before making any, so alias analysis sees the graph it was
// built on.
void planBlock(Block* block, const torch::jit::AliasDb& alias_db, std::vector<LoopRewrite>& plan) {
  std::set<ProjectionKey> earlier;  // products made before this block's loops
  for (Node* node : block->nodes()) {
    for (Block* sub : node->blocks()) planBlock(sub, alias_db, plan);
    if (node->kind() != c10::prim::Loop || !isConstantTrue(node->input(1)) ||
        !isConstantTrue(node->blocks()[0]->outputs()[0])) {
      continue;
    }
    auto steps = hoistable(node, stepProjections(node, alias_db), earlier);
    if (steps.empty()) continue;
    for (const StepProjection& p : steps) earlier.insert(keyOf(p));
    plan.push_back({node, std::move(steps)});
  }
}

bool hasLoop(Block* block) {
  for (Node* node : block->nodes()) {
    if (node->kind() == c10::prim::Loop) return true;
    for (Block* sub : node->blocks()) {
      if (hasLoop(sub)) return true;
    }
  }
  return false;
}

}  // namespace

void hoistLoopInvariantProjections(GraphPtr& graph) {
  // Most graphs have no loop: they skip building alias analysis.
  if (!config().hoist_projections || !hasLoop(graph->block())) return;
  std::vector<LoopRewrite> plan;
  {
    const torch::jit::AliasDb alias_db(graph);
    planBlock(graph->block(), alias_db, plan);
  }
  // A product serves later loops of its block (an unrolled loop's remainder).
  std::map<std::pair<Block*, ProjectionKey>, Value*> products;
  for (const LoopRewrite& rewrite : plan) {
    for (const StepProjection& p : rewrite.steps) {
      auto [at, fresh] = products.try_emplace({rewrite.loop->owningBlock(), keyOf(p)}, nullptr);
      if (fresh) at->second = insertWholeProduct(rewrite.loop, p);
      readStepFromProduct(p, at->second);
    }
  }
}

}  // namespace fuser
