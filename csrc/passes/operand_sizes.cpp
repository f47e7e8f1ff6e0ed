// readSizesFromOperands: the size of an elementwise result, asked for by a fusible op,
// is read from the result's operands.
//
// `layer_norm(y, [y.size(-1)])` with `y = x + r`: the size is read after the add, and the
// layer_norm reads it, so the add and the layer_norm cannot share a group (the size
// would have to run between them). The size of an elementwise result is the broadcast of
// its operands' sizes whatever their values, so it can be read before the op runs:
//   aten::size(y, d)  ->  fuser::size_at(prim::BroadcastSizes(size(x), size(r)), d)
//   aten::size(y)     ->  prim::BroadcastSizes(size(x), size(r))
// going back through chains of such ops to values that are not their results (an op of
// one tensor operand hands on that operand's size itself, and aten::size(x, d) stays).
// fuser::size_at raises aten::size's errors for a dim out of range; where the operands
// do not broadcast, BroadcastSizes raises eager's message of the op.
//
// After it runs, every `aten::size` of such a result whose value reaches an op of the
// fusible table (through lists, tuples and arithmetic) reads its operands instead,
// unless the result or a value it is computed from is written in place somewhere
// (`x.unsqueeze_(0)` between the op and the size read changes the size, not the
// operands'). Sizes read for anything else are left: the expression costs a few
// interpreter steps per call and would gain nothing there.
#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <vector>

#include "ops/op_table.h"
#include "passes/pipeline.h"
#include "passes/shapes.h"
#include "symbols.h"
#include "value_types.h"

namespace fuser {
namespace {

using torch::jit::Block;
using torch::jit::Node;
using torch::jit::Value;

bool isSizeAtDim(const Node* node) {
  return node->kind() == c10::aten::size && node->inputs().size() == 2;
}

// The operands whose sizes broadcast to the node's result, or nothing where the result's
// size is not so made (a reduction, an op of several results, an optional tensor that
// may be None at run time).
std::optional<std::vector<Value*>> shapeOperands(Node* node) {
  const ops::OpEntry* entry = ops::findOp(node);
  if (!entry || entry->reduces || entry->lower_outputs || node->outputs().size() != 1) {
    return std::nullopt;
  }
  if (keepsSelfShape(node)) return std::vector<Value*>{node->input(0)};
  std::vector<Value*> operands;
  for (Value* in : node->inputs()) {
    if (in->type()->cast<c10::OptionalType>()) return std::nullopt;
    if (isTensor(in) && std::find(operands.begin(), operands.end(), in) == operands.end()) {
      operands.push_back(in);
    }
  }
  if (operands.empty()) return std::nullopt;
  return operands;
}

// Whether `v` (an int or int[] read from a size) reaches an op of the table, through
// lists, tuples and arithmetic.
bool reachesFusibleOp(const Value* v, int depth = 0) {
  if (depth > 6) return false;
  for (const auto& use : v->uses()) {
    const Node* user = use.user;
    if (ops::findOp(user)) return true;
    for (const Value* out : user->outputs()) {
      auto kind = out->type()->kind();
      bool carries_size = kind == c10::TypeKind::IntType || kind == c10::TypeKind::FloatType ||
                          kind == c10::TypeKind::NumberType || kind == c10::TypeKind::ListType ||
                          kind == c10::TypeKind::TupleType;
      if (carries_size && reachesFusibleOp(out, depth + 1)) return true;
    }
  }
  return false;
}

// Size expressions of one size read, built before it (`anchor`); each value's once, so
// residual chains (`x = x + f(x)`, every value read twice) stay linear.
class OperandSizes {
 public:
  OperandSizes(Node* anchor, const torch::jit::AliasDb& aliases)
      : anchor_(anchor), aliases_(aliases) {}

  // Whether the sizes of `v` can be read from the values it is computed from: no value
  // on the way is written in place.
  bool readable(Value* v) {
    if (auto it = readable_.find(v); it != readable_.end()) return it->second;
    bool ok = !aliases_.hasWriters(v);
    if (auto operands = shapeOperands(v->node()); ok && operands) {
      ok = std::all_of(operands->begin(), operands->end(), [&](Value* in) { return readable(in); });
    }
    readable_.emplace(v, ok);
    return ok;
  }

  // The int[] of `v`'s size, read from the operands of the elementwise ops it comes from.
  Value* wholeSizeOf(Value* v) {
    if (auto it = built_.find(v); it != built_.end()) return it->second;
    Value* size = nullptr;
    if (auto operands = shapeOperands(v->node())) {
      std::vector<Value*> sizes;
      for (Value* in : *operands) {
        Value* s = wholeSizeOf(in);
        if (std::find(sizes.begin(), sizes.end(), s) == sizes.end()) sizes.push_back(s);
      }
      size = sizes.size() == 1 ? sizes[0] : insert(c10::prim::BroadcastSizes, sizes);
    } else {
      size = insert(c10::aten::size, {v});
    }
    built_.emplace(v, size);
    return size;
  }

  // size(v, dim): where the chain ends in one operand, that operand's own size at `dim`.
  Value* sizeAt(Value* v, Value* dim) {
    Value* source = v;
    while (auto operands = shapeOperands(source->node())) {
      if (operands->size() != 1) break;
      source = (*operands)[0];
    }
    torch::jit::WithInsertPoint guard(anchor_);
    auto* graph = anchor_->owningGraph();
    if (!shapeOperands(source->node())) return graph->insert(c10::aten::size, {source, dim});
    Node* at = graph->create(sizeAtSymbol(), {wholeSizeOf(source), dim});
    at->insertBefore(anchor_);
    at->output()->setType(c10::IntType::get());
    return at->output();
  }

 private:
  Value* insert(c10::Symbol kind, const std::vector<Value*>& inputs) {
    Node* node = anchor_->owningGraph()->create(kind, inputs);
    node->insertBefore(anchor_);
    node->output()->setType(c10::ListType::ofInts());
    return node->output();
  }

  Node* anchor_;
  const torch::jit::AliasDb& aliases_;
  std::unordered_map<Value*, Value*> built_;
  std::unordered_map<Value*, bool> readable_;
};

bool readsElementwiseResult(Node* node) {
  if (!isWholeSize(node) && !isSizeAtDim(node)) return false;
  return isTensor(node->input(0)) && shapeOperands(node->input(0)->node()).has_value();
}

// The size reads a fusible op depends on, of elementwise results.
void collect(Block* block, std::vector<Node*>& found) {
  for (Node* node : block->nodes()) {
    for (Block* sub : node->blocks()) collect(sub, found);
    if (readsElementwiseResult(node) && reachesFusibleOp(node->output())) found.push_back(node);
  }
}

}  // namespace

void readSizesFromOperands(GraphPtr& graph) {
  std::vector<Node*> reads;
  collect(graph->block(), reads);
  if (reads.empty()) return;  // (most graphs: no alias analysis built)
  {
    // Judged on the graph as it was, before any rewrite.
    torch::jit::AliasDb aliases(graph);
    reads.erase(std::remove_if(reads.begin(), reads.end(),
                               [&](Node* node) {
                                 return !OperandSizes(node, aliases).readable(node->input(0));
                               }),
                reads.end());
    for (Node* node : reads) {
      OperandSizes sizes(node, aliases);
      Value* size = isWholeSize(node) ? sizes.wholeSizeOf(node->input(0))
                                      : sizes.sizeAt(node->input(0), node->input(1));
      node->output()->replaceAllUsesWith(size);
    }
  }
  for (Node* node : reads) node->destroy();
}

}  // namespace fuser
