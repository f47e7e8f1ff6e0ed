#include "passes/concat.h"

#include <c10/core/MemoryFormat.h>

#include <algorithm>
#include <vector>

#include "passes/fusibility.h"
#include "passes/groups.h"

namespace fuser {

using torch::jit::Node;
using torch::jit::Value;

namespace {

// Whether `piece` is computed by a fusible node beside `cat`, one a group can take.
bool isComputedHere(const Value* piece, const Node* cat) {
  const Node* producer = piece->node();
  return producer->owningBlock() == cat->owningBlock() &&
         producer->kind() != c10::prim::Constant && checkFusible(producer);
}

}  // namespace

bool isCat(const Node* node) {
  return node->kind() == c10::aten::cat && node->inputs().size() == 2 &&
         node->input(0)->node()->kind() == c10::prim::ListConstruct;
}

std::optional<int64_t> catDim(const Node* cat) {
  auto dim = torch::jit::toIValue(cat->input(1));
  if (!dim || !dim->isInt()) return std::nullopt;
  return dim->toInt();
}

FusionDecision checkCatFusible(const Node* cat) {
  if (!isCat(cat)) return FusionDecision::no("its list is not built by prim::ListConstruct");
  const auto dim = catDim(cat);
  if (!dim) return FusionDecision::no("its dim is not a constant");
  const Value* list = cat->input(0);
  if (list->uses().size() != 1) {
    return FusionDecision::no("its list %" + list->debugName() + " is also read elsewhere");
  }
  const Node* list_node = list->node();
  if (list_node->owningBlock() != cat->owningBlock()) {
    return FusionDecision::no("its list is built in another block");
  }
  if (list_node->inputs().empty()) return FusionDecision::no("it has no pieces");
  std::optional<std::vector<int64_t>> shape;
  std::optional<c10::ScalarType> dtype;
  bool any_computed = false;
  for (const Value* piece : list_node->inputs()) {
    const std::string name = "piece %" + piece->debugName();
    if (auto d = checkTensorValue(piece); !d) return d;
    any_computed = any_computed || isComputedHere(piece, cat);
    const auto& type = piece->type()->expectRef<c10::TensorType>();
    auto sizes = type.sizes().concrete_sizes();
    if (!sizes) return FusionDecision::no(name + " has no profiled sizes");
    if (sizes->empty()) return FusionDecision::no(name + " is 0-dim");
    if (shape && *shape != *sizes) {
      return FusionDecision::no(name + " differs in size from the first piece (kernels write "
                                       "equal-sized pieces only)");
    }
    if (dtype && *dtype != *type.scalarType()) {
      return FusionDecision::no(name + " differs in dtype from the first piece");
    }
    shape = sizes;
    dtype = type.scalarType();
  }
  const auto rank = static_cast<int64_t>(shape->size());
  if (*dim < -rank || *dim >= rank) return FusionDecision::no("its dim is out of range");
  if (!any_computed) {
    return FusionDecision::no("no piece is computed by a fusible node; the cat would be a copy");
  }
  return FusionDecision::yes();
}

FusionDecision checkCatStaysOutput(const Node* consumer, const Node* producer) {
  static const FusionDecision kRefused = FusionDecision::no(
      "a cat result would be read inside the group; the kernel writes cats as outputs only");
  if (isCat(producer)) return kRefused;
  if (!isFusionGroup(producer)) return FusionDecision::yes();
  auto subgraph = producer->g(torch::jit::attr::Subgraph);
  for (size_t k = 0; k < subgraph->outputs().size(); ++k) {
    if (!isCat(subgraph->outputs()[k]->node())) continue;
    for (const auto& use : producer->output(k)->uses()) {
      if (use.user == consumer) return kRefused;
    }
  }
  return FusionDecision::yes();
}

namespace {

bool isGroupInput(const Value* piece) {
  return piece->node() == piece->owningGraph()->param_node();
}

std::vector<Node*> catListsOf(const Node* group) {
  std::vector<Node*> lists;
  for (Node* node : group->g(torch::jit::attr::Subgraph)->nodes()) {
    if (isCat(node)) lists.push_back(node->input(0)->node());
  }
  return lists;
}

}  // namespace

FusionDecision checkCatPiecesComputed(const Node* group) {
  for (const Node* list : catListsOf(group)) {
    if (std::all_of(list->inputs().begin(), list->inputs().end(), isGroupInput)) {
      return FusionDecision::no("none of its pieces could join the group; the cat would be a "
                                "copy");
    }
  }
  return FusionDecision::yes();
}

void copyInputPieces(Node* group) {
  auto subgraph = group->g(torch::jit::attr::Subgraph);
  for (Node* list : catListsOf(group)) {
    for (size_t i = 0; i < list->inputs().size(); ++i) {
      Value* piece = list->input(i);
      if (!isGroupInput(piece)) continue;
      torch::jit::WithInsertPoint before(list);
      Value* format =
          subgraph->insertConstant(static_cast<int64_t>(c10::MemoryFormat::Contiguous));
      Node* copy = subgraph->insertNode(subgraph->create(c10::aten::contiguous, {piece, format}));
      copy->output()->setType(piece->type()->expect<c10::TensorType>()->contiguous());
      list->replaceInput(i, copy->output());
    }
  }
}

}  // namespace fuser
