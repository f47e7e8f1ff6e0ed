#include "passes/concat.h"

#include "passes/fusibility.h"
#include "passes/groups.h"

namespace fuser {

using torch::jit::Node;
using torch::jit::Value;

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
  for (const Value* piece : list_node->inputs()) {
    const std::string name = "piece %" + piece->debugName();
    if (auto d = checkTensorValue(piece); !d) return d;
    const Node* producer = piece->node();
    if (producer->owningBlock() != cat->owningBlock() || !checkFusible(producer) ||
        producer->kind() == c10::prim::Constant) {
      return FusionDecision::no(name + " is not computed by a fusible node");
    }
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

FusionDecision checkCatPiecesComputed(const Node* group) {
  auto subgraph = group->g(torch::jit::attr::Subgraph);
  for (const Node* node : subgraph->nodes()) {
    if (!isCat(node)) continue;
    for (const Value* piece : node->input(0)->node()->inputs()) {
      if (piece->node() == subgraph->param_node()) {
        return FusionDecision::no("its piece %" + piece->debugName() +
                                  " could not join the group; the cat would be a copy");
      }
    }
  }
  return FusionDecision::yes();
}

}  // namespace fuser
