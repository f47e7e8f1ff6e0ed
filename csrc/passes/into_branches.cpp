// moveOpsIntoBranches: fusible ops next to an `if` move into its branches, where they
// can join the groups there: no group crosses a block's boundary.
//
// Models branch on whether to add a mask: torchvision's Swin adds its relative position
// bias to the attention scores, adds the shifted-window mask inside `if shift > 0`, and
// takes the softmax after; transformers models add an optional attention mask inside
// `if mask is not None`. Each add and the softmax then run as kernels of their own.
// After this pass:
// - a fusible op after the `if` whose only input from it is one of its results, read by
//   nothing else, and whose other inputs are defined before the `if`, runs at the end of
//   each branch instead (the `if` returns its result), where each branch returns that
//   result with the type profiling saw, or was never profiled (its copy of the op then
//   has no profiled type either, and runs unfused);
// - a fusible op before the `if` whose results only the branches read, every branch
//   (after dead code is gone: it still runs on every path, raising what it raised), and
//   whose tensor inputs no fusible op makes (it could join their group where it is),
//   runs at the start of each branch.
// Neither moves across a write, a side effect or an `if` holding one (order_barriers.h):
// each reads what it read and raises its errors where it raised them.
// Each branch computes what the graph computed along it, so the values are the same.
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <vector>

#include "passes/fusibility.h"
#include "passes/nesting.h"
#include "passes/order_barriers.h"
#include "passes/pipeline.h"
#include "symbols.h"

namespace fuser {
namespace {

using torch::jit::Block;
using torch::jit::Node;
using torch::jit::Value;

// Whether `value` is defined where `node` can read it without moving it.
bool definedBefore(const Value* value, const Node* node) {
  const Node* outer = holderIn(node, value->node()->owningBlock());
  return outer && value->node()->isBefore(outer);
}

bool isIf(const Node* node) { return node->kind() == c10::prim::If; }

bool isComplete(const Value* v) {
  auto type = v->type()->cast<c10::TensorType>();
  return type && type->isComplete();
}

// Whether each branch returns, as result `i`, a value of the type profiling saw the
// result have, or one profiling never saw (a branch that did not run). A moved op keeps
// its profiled type only in the first kind of branch; in a branch that returns another
// complete type (another dtype) its type would be wrong.
bool returnsAsProfiled(const Node* branch_node, size_t i) {
  const c10::TypePtr& seen = branch_node->output(i)->type();
  for (const Block* branch : branch_node->blocks()) {
    const Value* returned = branch->outputs()[i];
    if (isComplete(returned) && *returned->type() != *seen) return false;
  }
  return true;
}

// The op after `branch_node` that reads one of its results and may move into its
// branches, with that result's index; null where none may.
Node* followerToSink(Node* branch_node, size_t& result) {
  for (size_t i = 0; i < branch_node->outputs().size(); ++i) {
    const Value* out = branch_node->output(i);
    if (out->uses().size() != 1) continue;
    Node* user = out->uses()[0].user;
    if (user->owningBlock() != branch_node->owningBlock() || user->outputs().size() != 1 ||
        !checkFusible(user)) {
      continue;
    }
    bool movable = returnsAsProfiled(branch_node, i) && !barrierBetween(branch_node, user);
    for (const Value* in : user->inputs()) {
      if (in == out) continue;
      if (in->node() == branch_node || !definedBefore(in, branch_node)) movable = false;
    }
    if (movable) {
      result = i;
      return user;
    }
  }
  return nullptr;
}

void sinkIntoBranches(Node* branch_node, Node* follower, size_t result) {
  Value* read = branch_node->output(result);
  for (Block* branch : branch_node->blocks()) {
    Value* returned = branch->outputs()[result];
    Node* copy = branch->owningGraph()->createClone(
        follower, [&](Value* v) { return v == read ? returned : v; });
    copy->insertBefore(branch->return_node());
    // Where profiling never ran the branch, neither has its op a profiled type.
    if (!isComplete(returned)) copy->output()->setType(c10::TensorType::get());
    branch->return_node()->replaceInput(result, copy->output());
  }
  read->setType(follower->output()->type());
  follower->output()->replaceAllUsesWith(read);
  follower->destroy();
}

// Whether `producer`, before `branch_node`, may move into its branches.
bool mayHoistInto(const Node* producer, const Node* branch_node) {
  if (producer->owningBlock() != branch_node->owningBlock() || !producer->isBefore(branch_node) ||
      !checkFusible(producer) || producer->kind() == fusionGroupSymbol()) {
    return false;
  }
  for (const Value* in : producer->inputs()) {
    if (in->type()->kind() == c10::TypeKind::TensorType && checkFusible(in->node())) {
      return false;  // it may join its producer's group where it is
    }
  }
  for (const Value* out : producer->outputs()) {
    if (out->uses().empty()) return false;
    for (const torch::jit::Use& use : out->uses()) {
      const Node* user = holderIn(use.user, branch_node->owningBlock());
      if (user != branch_node || use.user == branch_node) return false;  // read elsewhere
    }
  }
  // Every branch runs it still (dead code went first), so its errors (a bool
  // subtraction, shapes that do not broadcast) are raised on every path as before.
  for (const Block* branch : branch_node->blocks()) {
    bool read = false;
    for (const Value* out : producer->outputs()) {
      for (const torch::jit::Use& use : out->uses()) read |= holderIn(use.user, branch) != nullptr;
    }
    if (!read) return false;
  }
  return !barrierBetween(producer, branch_node);
}

void hoistIntoBranches(Node* producer, Node* branch_node) {
  for (Block* branch : branch_node->blocks()) {
    Node* copy = nullptr;
    for (size_t i = 0; i < producer->outputs().size(); ++i) {
      Value* out = producer->output(i);
      std::vector<torch::jit::Use> uses = out->uses();
      for (const torch::jit::Use& use : uses) {
        if (holderIn(use.user, branch) == nullptr) continue;
        if (!copy) {
          copy = branch->owningGraph()->createClone(producer, [](Value* v) { return v; });
          copy->insertBefore(branch->nodes().front());
        }
        use.user->replaceInput(use.offset, copy->output(i));
      }
    }
  }
  producer->destroy();
}

void collectReads(Block* block, const Block* outer, std::vector<Node*>& producers) {
  for (Node* node : block->nodes()) {
    for (Block* sub : node->blocks()) collectReads(sub, outer, producers);
    for (Value* in : node->inputs()) {
      if (in->node()->owningBlock() == outer) producers.push_back(in->node());
    }
  }
  for (Value* out : block->outputs()) {
    if (out->node()->owningBlock() == outer) producers.push_back(out->node());
  }
}

// The nodes of `branch_node`'s block whose results its branches read.
std::vector<Node*> producersReadInside(Node* branch_node) {
  std::vector<Node*> producers;
  for (Block* branch : branch_node->blocks()) {
    collectReads(branch, branch_node->owningBlock(), producers);
  }
  return producers;
}

void moveIn(Block* block) {
  for (auto it = block->nodes().begin(); it != block->nodes().end(); ++it) {
    for (Block* sub : it->blocks()) moveIn(sub);
  }
  std::vector<Node*> branch_nodes;
  for (Node* node : block->nodes()) {
    if (isIf(node)) branch_nodes.push_back(node);
  }
  for (Node* branch_node : branch_nodes) {
    size_t result = 0;
    while (Node* follower = followerToSink(branch_node, result)) {
      sinkIntoBranches(branch_node, follower, result);
    }
    // Moving a producer in may free the ones it reads: repeat until none moves.
    for (bool moved = true; moved;) {
      moved = false;
      for (Node* producer : producersReadInside(branch_node)) {
        if (!mayHoistInto(producer, branch_node)) continue;
        hoistIntoBranches(producer, branch_node);
        moved = true;
        break;
      }
    }
  }
}

}  // namespace

void moveOpsIntoBranches(GraphPtr& graph) {
  torch::jit::EliminateDeadCode(graph);  // a branch's dead reader is no reader
  moveIn(graph->block());
}

}  // namespace fuser
