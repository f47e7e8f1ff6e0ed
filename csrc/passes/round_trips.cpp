// cancelRoundTrips: in every fusion group, a conversion back to a value's own dtype
// through a dtype that holds each of its values exactly reads that value instead.
//
// Autocast graphs and user casts make such pairs (`h.float()` feeding a matmul that
// autocast runs in h's dtype again). half -> float -> half and bfloat16 -> float ->
// bfloat16 (or through double), and float -> double -> float, give back the very value;
// a narrowing first step (float -> half -> float) rounds, so eager's result differs from
// the input and the pair stays. Conversions are the table's casts (to, _to_copy,
// type_as, the autocast casts); the dtypes are the subgraph's profiled types, which the
// group's guard fixes.
//
// After it runs, no value in a group's subgraph is such a round trip of another unless
// the round trip is a group output whose source is a group input or already an output
// (the group then still writes it: a group output is never an input passed through).
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "passes/groups.h"
#include "passes/pipeline.h"

namespace fuser {
namespace {

using torch::jit::Node;
using torch::jit::Value;

bool isConversion(const Node* node) {
  static const c10::Symbol to = c10::Symbol::fromQualString("aten::to");
  static const c10::Symbol to_copy = c10::Symbol::fromQualString("aten::_to_copy");
  static const c10::Symbol reduced =
      c10::Symbol::fromQualString("aten::_autocast_to_reduced_precision");
  static const c10::Symbol full =
      c10::Symbol::fromQualString("aten::_autocast_to_full_precision");
  const c10::Symbol kind = node->kind();
  return kind == to || kind == to_copy || kind == c10::aten::type_as || kind == reduced ||
         kind == full;
}

std::optional<c10::ScalarType> dtypeOf(const Value* v) {
  auto type = v->type()->cast<c10::TensorType>();
  return type ? type->scalarType() : std::nullopt;
}

// Every value of `narrow` is exactly a value of `wide`.
bool holdsExactly(c10::ScalarType wide, c10::ScalarType narrow) {
  using c10::ScalarType;
  switch (narrow) {
    case ScalarType::Half:
    case ScalarType::BFloat16: return wide == ScalarType::Float || wide == ScalarType::Double;
    case ScalarType::Float: return wide == ScalarType::Double;
    default: return false;
  }
}

// The value `back` converts back from, if `back` is a round trip as above.
Value* roundTripSource(const Node* back) {
  if (!isConversion(back)) return nullptr;
  const Node* there = back->input(0)->node();
  if (!isConversion(there)) return nullptr;
  Value* source = there->input(0);
  auto a = dtypeOf(source), b = dtypeOf(there->output()), c = dtypeOf(back->output());
  if (!a || !b || !c || *a != *c || !holdsExactly(*b, *a)) return nullptr;
  return source;
}

void cancelInGroup(Node* group) {
  auto subgraph = group->g(torch::jit::attr::Subgraph);
  const auto& outputs = subgraph->outputs();
  auto isOutput = [&](const Value* v) {
    return std::find(outputs.begin(), outputs.end(), v) != outputs.end();
  };
  auto isInput = [&](const Value* v) { return v->node() == subgraph->param_node(); };
  bool changed = false;
  for (Node* node : subgraph->nodes()) {
    Value* source = roundTripSource(node);
    if (!source) continue;
    const bool source_written = isInput(source) || isOutput(source);
    const std::vector<torch::jit::Use> uses = node->output()->uses();
    for (const torch::jit::Use& use : uses) {
      if (use.user == subgraph->return_node() && source_written) continue;
      use.user->replaceInput(use.offset, source);
      changed = true;
    }
  }
  if (changed) torch::jit::EliminateDeadCode(subgraph);
}

}  // namespace

void cancelRoundTrips(GraphPtr& graph) {
  for (Node* group : collectFusionGroups(graph->block())) {
    if (!isGuardedGroup(group)) cancelInGroup(group);
  }
}

}  // namespace fuser
