// readSizesFromOperands: the size of an elementwise result, asked for by a fusible op,
// is read from the result's operands.
//
// `layer_norm(y, [y.size(-1)])` with `y = x + r`: the size is read after the add, and the
// layer_norm reads it, so the add and the layer_norm cannot share a group (the size
// would have to run between them). The size of an elementwise result is the broadcast of
// its operands' sizes whatever their values, so it can be read before the op runs:
//   aten::size(y, d)  ->  aten::__getitem__(prim::BroadcastSizes(size(x), size(r)), d)
//   aten::size(y)     ->  prim::BroadcastSizes(size(x), size(r))
// going back through chains of such ops to values that are not their results (an op of
// one tensor operand hands on that operand's size itself). Where the operands do not
// broadcast, BroadcastSizes raises eager's own message of the op.
//
// After it runs, every `aten::size` of such a result whose value reaches an op of the
// fusible table (through lists, tuples and arithmetic) reads its operands instead.
// Sizes read for anything else are left: the expression costs a few interpreter steps
// per call and would gain nothing there.
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "ops/op_table.h"
#include "passes/pipeline.h"
#include "passes/shapes.h"

namespace fuser {
namespace {

using torch::jit::Block;
using torch::jit::Node;
using torch::jit::Value;

bool isTensor(const Value* v) { return v->type()->cast<c10::TensorType>() != nullptr; }

bool isSizeAtDim(const Node* node) {
  return node->kind() == c10::aten::size && node->inputs().size() == 2;
}

// Ops whose result has `self`'s shape whatever the other operands' shapes.
bool keepsSelfShape(Node* node) {
  static const std::unordered_set<std::string> kinds = {
      "aten::type_as", "aten::batch_norm", "fuser::batch_norm_with_stats",
      "fuser::masked_fill_like_self"};
  return kinds.count(node->kind().toQualString()) > 0 ||
         (node->kind() == c10::aten::to && node->inputs().size() > 1 &&
          isTensor(node->input(1)));
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

// Builds size expressions before `anchor`.
class OperandSizes {
 public:
  explicit OperandSizes(Node* anchor) : anchor_(anchor) {}

  // The int[] of `v`'s size, read from the operands of the elementwise ops it comes from.
  Value* wholeSizeOf(Value* v) {
    auto operands = shapeOperands(v->node());
    if (!operands) return insert(c10::aten::size, {v});
    std::vector<Value*> sizes;
    for (Value* in : *operands) sizes.push_back(wholeSizeOf(in));
    if (sizes.size() == 1) return sizes[0];
    return insert(c10::prim::BroadcastSizes, sizes);
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
    if (shapeOperands(source->node())) {
      return graph->insert(c10::aten::__getitem__, {wholeSizeOf(source), dim});
    }
    return graph->insert(c10::aten::size, {source, dim});
  }

 private:
  Value* insert(c10::Symbol kind, const std::vector<Value*>& inputs) {
    Node* node = anchor_->owningGraph()->create(kind, inputs);
    node->insertBefore(anchor_);
    node->output()->setType(c10::ListType::ofInts());
    return node->output();
  }

  Node* anchor_;
};

bool readsElementwiseResult(Node* node) {
  if (!isWholeSize(node) && !isSizeAtDim(node)) return false;
  return isTensor(node->input(0)) && shapeOperands(node->input(0)->node()).has_value();
}

void rewriteBlock(Block* block) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* node = *it++;
    for (Block* sub : node->blocks()) rewriteBlock(sub);
    if (!readsElementwiseResult(node) || !reachesFusibleOp(node->output())) continue;
    OperandSizes sizes(node);
    Value* size = isWholeSize(node) ? sizes.wholeSizeOf(node->input(0))
                                    : sizes.sizeAt(node->input(0), node->input(1));
    node->output()->replaceAllUsesWith(size);
    node->destroy();
  }
}

}  // namespace

void readSizesFromOperands(GraphPtr& graph) { rewriteBlock(graph->block()); }

}  // namespace fuser
