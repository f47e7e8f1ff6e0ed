// buildShapeExpressions: group outputs read only for their size stop being outputs.
//
// Autodiff's forward graphs keep values alive just so the backward can ask their size
// (for aten::_grad_sum_to_size). Writing a whole tensor for that is waste: the size of
// every elementwise result is the broadcast of its operands' sizes, so it can be computed
// outside the group from the sizes of the group's inputs.
//
// After it runs, for each group formed by this run that has an output read otherwise,
// each output whose every use is `aten::size(out)` is gone from the group (and its
// subgraph); those uses read an expression built right after the group from
//   aten::size(group input), prim::BroadcastSizes(sizes...) for elementwise results,
//   prim::ChunkSizes[chunks, dim](size) for chunks (regular size, last chunk's size),
//   aten::size(group output) for a value the group still outputs.
// simplifyShapeExpressions (run by cleanup) then tidies such expressions.
#include "passes/shapes.h"
#include "value_types.h"

#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ops/batch_norm.h"
#include "ops/op_table.h"
#include "passes/chunks.h"
#include "passes/concat.h"
#include "passes/groups.h"
#include "passes/pipeline.h"
#include "symbols.h"

namespace fuser {
namespace {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

bool onlyReadForSize(const Value* v) {
  if (v->uses().empty()) return false;
  return std::all_of(v->uses().begin(), v->uses().end(),
                     [](const torch::jit::Use& use) { return isWholeSize(use.user); });
}

// Builds, after `group`, the size of any value of its subgraph.
class SizeBuilder {
 public:
  SizeBuilder(Node* group, std::unordered_set<size_t> dropped)
      : group_(group),
        subgraph_(group->g(torch::jit::attr::Subgraph)),
        outer_(group->owningGraph()),
        dropped_(std::move(dropped)) {}

  // The int[] holding the size of `v` (a subgraph value), or nullptr if unknown.
  Value* sizeOf(Value* v) {
    if (auto it = sizes_.find(v); it != sizes_.end()) return it->second;
    Value* size = build(v);
    sizes_[v] = size;
    return size;
  }

 private:
  Value* build(Value* v) {
    if (v->node() == subgraph_->param_node()) return wholeSize(group_->input(v->offset()));
    for (size_t k = 0; k < subgraph_->outputs().size(); ++k) {
      if (subgraph_->outputs()[k] == v && !dropped_.count(k)) return wholeSize(group_->output(k));
    }
    Node* node = v->node();
    if (isChunk(node)) return chunkSize(node, v->offset());
    // A cat is not elementwise; it stays an output rather than have its size built.
    if (isCat(node)) return nullptr;
    // Some ops keep self's shape; a reduction keeps its output (its size is not a
    // broadcast); every other op of the table broadcasts its operands.
    if (keepsSelfShape(node)) return sizeOf(node->input(0));
    if (const ops::OpEntry* entry = ops::findOp(node); entry && entry->reduces) return nullptr;
    std::vector<Value*> operands;
    for (Value* in : node->inputs()) {
      if (!isTensor(in)) continue;
      Value* size = sizeOf(in);
      if (!size) return nullptr;
      operands.push_back(size);
    }
    return broadcastSizes(operands);
  }

  Value* chunkSize(Node* chunk, size_t output) {
    const int64_t n = chunk->i(c10::attr::chunks);
    std::vector<Value*> operands;
    for (Value* in : chunk->inputs()) {
      Value* size = sizeOf(in);
      if (!size) return nullptr;
      operands.push_back(size);
    }
    Value* whole = broadcastSizes(operands);
    if (!whole) return nullptr;
    Node* split = insert(outer_->create(c10::prim::ChunkSizes, {whole}, 2));
    split->i_(c10::attr::chunks, n)->i_(c10::attr::dim, chunk->i(c10::attr::dim));
    for (Value* out : split->outputs()) out->setType(c10::ListType::ofInts());
    const bool last = static_cast<int64_t>(output) % n == n - 1;
    return split->output(last ? 1 : 0);
  }

  Value* broadcastSizes(const std::vector<Value*>& operands) {
    if (operands.empty()) return nullptr;
    if (operands.size() == 1) return operands[0];
    Node* node = insert(outer_->create(c10::prim::BroadcastSizes, operands));
    node->output()->setType(c10::ListType::ofInts());
    return node->output();
  }

  Value* wholeSize(Value* tensor) {
    if (!isTensor(tensor)) return nullptr;
    Node* node = insert(outer_->create(c10::aten::size, {tensor}));
    node->output()->setType(c10::ListType::ofInts());
    return node->output();
  }

  // Expressions go right after the group, in the order they are built, so each follows
  // what it reads.
  Node* insert(Node* node) {
    node->insertAfter(last_inserted_ ? last_inserted_ : group_);
    last_inserted_ = node;
    return node;
  }

  Node* group_;
  std::shared_ptr<Graph> subgraph_;
  Graph* outer_;
  std::unordered_set<size_t> dropped_;
  std::unordered_map<Value*, Value*> sizes_;
  Node* last_inserted_ = nullptr;
};

void dropSizeOnlyOutputs(Node* group) {
  std::unordered_set<size_t> dropped;
  for (size_t k = 0; k < group->outputs().size(); ++k) {
    if (onlyReadForSize(group->output(k))) dropped.insert(k);
  }
  // A group whose every output is read only for its size stays whole: without it no
  // op would run, and a call whose dtypes make an op raise in eager (a bool
  // subtraction) would return instead of raising; its guard sends that call to the
  // fallback, which raises.
  if (dropped.empty() || dropped.size() == group->outputs().size()) return;
  auto subgraph = group->g(torch::jit::attr::Subgraph);
  SizeBuilder sizes(group, dropped);
  std::vector<size_t> removable;
  for (size_t k : dropped) {
    Value* size = sizes.sizeOf(subgraph->outputs()[k]);
    if (!size) continue;
    for (const auto& use : group->output(k)->uses()) use.user->output()->replaceAllUsesWith(size);
    removable.push_back(k);
  }
  std::sort(removable.rbegin(), removable.rend());
  for (size_t k : removable) {
    while (!group->output(k)->uses().empty()) group->output(k)->uses()[0].user->destroy();
    group->eraseOutput(k);
    subgraph->eraseOutput(k);
  }
  torch::jit::EliminateDeadCode(subgraph);
}

// prim::BroadcastSizes(a) -> a; repeated operands kept once; an operand that is itself a
// BroadcastSizes read only here is replaced by its operands (broadcasting associates).
bool simplifyBroadcastSizes(Node* node) {
  std::vector<Value*> operands;
  bool changed = false;
  for (Value* in : node->inputs()) {
    Node* inner = in->node();
    if (inner->kind() == c10::prim::BroadcastSizes && in->uses().size() == 1) {
      operands.insert(operands.end(), inner->inputs().begin(), inner->inputs().end());
      changed = true;
    } else {
      operands.push_back(in);
    }
  }
  std::vector<Value*> unique;
  for (Value* v : operands) {
    if (std::find(unique.begin(), unique.end(), v) == unique.end()) unique.push_back(v);
  }
  changed = changed || unique.size() != node->inputs().size();
  if (unique.size() == 1) {
    node->output()->replaceAllUsesWith(unique[0]);
    node->destroy();
    return true;
  }
  if (changed) {
    node->removeAllInputs();
    for (Value* v : unique) node->addInput(v);
  }
  return changed;
}

bool simplifyBlock(Block* block) {
  bool changed = false;
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* node = *it++;
    for (Block* sub : node->blocks()) changed |= simplifyBlock(sub);
    if (node->kind() == c10::prim::BroadcastSizes) changed |= simplifyBroadcastSizes(node);
  }
  return changed;
}

}  // namespace

bool isWholeSize(const Node* node) {
  return node->kind() == c10::aten::size && node->inputs().size() == 1;
}

bool keepsSelfShape(const Node* node) {
  if (node->kind() == c10::aten::type_as || ops::isBatchNorm(node)) return true;
  if (node->kind() == maskedFillLikeSelfSymbol()) return true;
  // aten::to.other(self, other, ...): other gives the dtype and device only.
  return node->kind() == c10::aten::to && node->inputs().size() > 1 &&
         node->input(1)->type()->cast<c10::TensorType>() != nullptr;
}

void buildShapeExpressions(GraphPtr& graph) {
  for (Node* group : collectFusionGroups(graph->block())) {
    if (!isGuardedGroup(group)) dropSizeOnlyOutputs(group);
  }
}

void simplifyShapeExpressions(Block* block) {
  while (simplifyBlock(block)) {
  }
  torch::jit::EliminateDeadCode(block);
}

}  // namespace fuser
