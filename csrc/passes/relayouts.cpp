// gatherRelayouts: a chain of ops that only move elements, one of them a roll, becomes
// one gather.
//
// torchvision's Swin rolls its activations by half a window and splits them into
// windows (`roll`, `view`, `permute`, then a `reshape` that copies), and after attention
// merges the windows and rolls back: two or three passes over the activation each time,
// and ATen's roll kernel takes four times what its bytes take on the H200 (it computes
// each element's source with divisions). Such a chain moves elements only: each element
// of its result is one element of its input, at a place that depends on the input's
// sizes and strides and on the chain's numbers alone. After this pass the chain is a
// fuser::Relayout node holding it as its subgraph (symbols.h). At the first call with
// given input sizes, strides and numbers the node runs the chain on a tensor of the
// input's element offsets, which tells where each element goes; from then on one kernel
// copies the elements there (runtime/relayout_op.cpp).
//
// The ops that move elements: view and reshape to sizes, flatten, squeeze, unsqueeze,
// permute, transpose, slice, select, narrow, expand, contiguous, clone and roll; and an
// `if` with one result that each branch derives from one value before the `if` by such
// ops (its branches may compute numbers too, as Swin's computes its negated shifts, and
// hold the profiling records of a branch no call took). A
// chain is such ops in one block, each reading the one before it, every value but the
// last read by the next op alone. Chains without a roll stay: they copy once at most
// where ATen's copy is as fast as ours.
//
// The node runs where the chain's last op ran and reads what the chain read then, so no
// write or side effect may lie between the chain's first and last op, nor a write made
// functional that a later stage may make in place again. (An error the chain raises may
// now come after one that an op between them raises.) Its result may share the input's
// memory, as the chain's may (its schema says so). Chains of constants stay.
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "passes/lone_writes.h"
#include "passes/nesting.h"
#include "passes/order_barriers.h"
#include "passes/piece_subgraph.h"
#include "passes/pipeline.h"
#include "symbols.h"
#include "value_types.h"

namespace fuser {
namespace {

using torch::jit::Block;
using torch::jit::Node;
using torch::jit::Value;

bool holdsTensors(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::TensorType) return true;
  for (const c10::TypePtr& contained : type->containedTypes()) {
    if (holdsTensors(contained)) return true;
  }
  return false;
}

// An op that moves the elements of its first input and reads nothing else but numbers,
// lists of them, None and strings (dims by name).
bool isMover(const Node* node) {
  static const std::unordered_set<c10::Symbol> kinds = {
      c10::aten::view,      c10::aten::reshape,   c10::aten::flatten, c10::aten::squeeze,
      c10::aten::unsqueeze, c10::aten::permute,   c10::aten::transpose, c10::aten::slice,
      c10::aten::select,    c10::aten::narrow,    c10::aten::expand,  c10::aten::contiguous,
      c10::aten::clone,     c10::aten::roll};
  if (!kinds.count(node->kind()) || node->outputs().size() != 1 || node->inputs().empty() ||
      !isTensor(node->input(0)) || !isTensor(node->output())) {
    return false;
  }
  // view(dtype) reinterprets the bytes: the offsets it would move depend on the dtype.
  if (node->kind() == c10::aten::view &&
      (node->inputs().size() != 2 || node->input(1)->type()->kind() != c10::TypeKind::ListType)) {
    return false;
  }
  for (size_t i = 1; i < node->inputs().size(); ++i) {
    if (holdsTensors(node->input(i)->type())) return false;
  }
  return node->maybeSchema() != nullptr;
}

// A node that computes numbers only: no tensor in or out, no block, no effect.
bool computesNumbersOnly(const Node* node) {
  if (!node->blocks().empty() || isOrderBarrier(node) || node->isNondeterministic()) return false;
  for (const Value* v : node->inputs()) {
    if (holdsTensors(v->type())) return false;
  }
  for (const Value* v : node->outputs()) {
    if (holdsTensors(v->type())) return false;
  }
  return true;
}

// A profiling record left in a branch no call took: it hands its input on unchanged.
bool isProfile(const Node* node) {
  return node->kind() == c10::prim::profile && node->inputs().size() == 1 &&
         node->outputs().size() == 1;
}

// The readers of `v` other than unread profiling records.
size_t readers(const Value* v) {
  return std::count_if(v->uses().begin(), v->uses().end(), [](const torch::jit::Use& use) {
    return !(isProfile(use.user) && !use.user->hasUses());
  });
}

bool containsRoll(const Node* node) {
  if (node->kind() == c10::aten::roll) return true;
  for (const Block* block : node->blocks()) {
    for (const Node* inner : block->nodes()) {
      if (containsRoll(inner)) return true;
    }
  }
  return false;
}

// The value an `if` moves into its one result, where each branch derives the result
// from it by movers alone, each mover's result read by the next alone; else null.
Value* movedByIf(Node* node) {
  if (node->kind() != c10::prim::If || node->outputs().size() != 1 || !isTensor(node->output())) {
    return nullptr;
  }
  Value* source = nullptr;
  auto takeSource = [&](Value* v) {
    if (source && source != v) return false;
    source = v;
    return true;
  };
  for (Block* block : node->blocks()) {
    Value* current = nullptr;  // the branch's latest moved value
    for (Node* inner : block->nodes()) {
      if (computesNumbersOnly(inner) || (isProfile(inner) && !inner->hasUses())) continue;
      if (!isMover(inner) && !isProfile(inner)) return nullptr;
      Value* in = inner->input(0);
      if (current ? in != current : (in->node()->owningBlock() == block || !takeSource(in))) {
        return nullptr;
      }
      if (current && readers(current) != 1) return nullptr;
      current = inner->output();
    }
    Value* result = block->outputs().at(0);
    if (current ? result != current || readers(current) != 1 : !takeSource(result)) {
      return nullptr;
    }
  }
  return source;
}

// The value a chain op moves: a mover's first input, what an `if` moves; else null.
Value* movedBy(Node* node) {
  if (isMover(node)) return node->input(0);
  return movedByIf(node);
}

// Whether every use of `v` lies in `node` (the node itself or its blocks).
bool readOnlyBy(const Value* v, const Node* node) {
  for (const torch::jit::Use& use : v->uses()) {
    if (holderIn(use.user, node->owningBlock()) != node) return false;
  }
  return !v->uses().empty();
}

// The block's chains with a roll, each in graph order.
std::vector<std::vector<Node*>> chainsIn(Block* block) {
  std::vector<std::vector<Node*>> chains;
  std::unordered_map<const Value*, size_t> chain_ending_in;  // a chain's last value
  for (Node* node : block->nodes()) {
    Value* moved = movedBy(node);
    if (!moved) continue;
    auto found = chain_ending_in.find(moved);
    if (found != chain_ending_in.end() && readOnlyBy(moved, node)) {
      const size_t index = found->second;
      chain_ending_in.erase(found);
      chains[index].push_back(node);
      chain_ending_in[node->output()] = index;
    } else {
      chain_ending_in[node->output()] = chains.size();
      chains.push_back({node});
    }
  }
  std::vector<std::vector<Node*>> rolling;
  for (auto& chain : chains) {
    const bool rolls = std::any_of(chain.begin(), chain.end(), containsRoll);
    if (rolls) rolling.push_back(std::move(chain));
  }
  return rolling;
}

// Whether the chain may run where its last op runs: no write, side effect or write made
// functional lies among its ops.
bool movableToItsEnd(const std::vector<Node*>& chain) {
  const std::unordered_set<const Node*> members(chain.begin(), chain.end());
  for (const Node* node = chain.front(); node != chain.back(); node = node->next()) {
    if (members.count(node)) continue;
    if (isOrderBarrier(node) || isFunctionalWrite(node)) return false;
  }
  return true;
}

// Replaces the chain by a fuser::Relayout node after its last op.
void gatherChain(const std::vector<Node*>& chain) {
  torch::jit::Graph& graph = *chain.front()->owningGraph();
  for (Node* node : chain) {
    for (Block* block : node->blocks()) {
      for (auto it = block->nodes().begin(); it != block->nodes().end();) {
        if (isProfile(*it)) {
          it->output()->replaceAllUsesWith(it->input());
          it.destroyCurrent();
        } else {
          ++it;
        }
      }
    }
  }
  Value* result = chain.back()->output();
  // The moved tensor is input 0.
  auto [subgraph, inputs] = copyPiece(chain, {result}, movedBy(chain.front()));

  Node* relayout = graph.create(relayoutSymbol(), inputs, 1);
  relayout->g_(c10::attr::Subgraph, subgraph);
  relayout->insertAfter(chain.back());
  relayout->output()->setType(result->type());
  result->replaceAllUsesWith(relayout->output());
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) (*it)->destroy();
}

// The block's chains, then those in the blocks of nodes no chain took (a chain's `if`
// holds a roll of its own).
void gatherIn(Block* block, std::vector<std::vector<Node*>>& found) {
  std::unordered_set<const Node*> taken;
  for (auto& chain : chainsIn(block)) {
    // A constant's moves are constants too (and the node's first input must be a tensor
    // value, not a constant cloned into its subgraph).
    if (movedBy(chain.front())->node()->kind() == c10::prim::Constant) continue;
    if (!movableToItsEnd(chain)) continue;
    taken.insert(chain.begin(), chain.end());
    found.push_back(std::move(chain));
  }
  for (Node* node : block->nodes()) {
    if (taken.count(node)) continue;
    for (Block* sub : node->blocks()) gatherIn(sub, found);
  }
}

}  // namespace

void gatherRelayouts(GraphPtr& graph) {
  std::vector<std::vector<Node*>> found;
  gatherIn(graph->block(), found);
  for (const auto& chain : found) gatherChain(chain);
}

}  // namespace fuser
