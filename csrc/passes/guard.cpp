// guardFusionGroups: every group formed by this run gets a run-time type check.
//
// After it runs, each such group reads
//   %ok : bool = fuser::TypeGuard[types=[profiled TensorType of each tensor input]](tensors)
//   %outs = prim::If(%ok)
//     block0(): %r = fuser::FusionGroup[Subgraph=...](inputs)       -> (%r)
//     block1(): %f = prim::FallbackGraph[Subgraph=copy](inputs)      -> (%f)
// and the group's former uses read the If's outputs. The fallback's subgraph is the
// group's ops, unmodified, with tensor types unspecialized: the profiling executor turns
// it into a function that is profiled and optimized again. A group whose tensor inputs
// lack a complete profiled type (dtype, device, rank) is unfused instead: its kernels
// could not be specialized.
#include <torch/csrc/jit/passes/tensorexpr_fuser.h>
#include <torch/csrc/jit/passes/utils/subgraph_utils.h>

#include "passes/chunks.h"
#include "passes/fusibility.h"
#include "passes/groups.h"
#include "passes/pipeline.h"
#include "symbols.h"

namespace fuser {
namespace {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;
using torch::jit::attr::Subgraph;

std::vector<Value*> tensorInputs(Node* group) {
  std::vector<Value*> out;
  for (Value* v : group->inputs()) {
    if (v->type()->cast<c10::TensorType>()) out.push_back(v);
  }
  return out;
}

bool hasCompleteTypes(const std::vector<Value*>& tensors) {
  for (const Value* v : tensors) {
    auto type = v->type()->expect<c10::TensorType>();
    if (!type->scalarType() || !type->device() || !type->dim()) return false;
  }
  return true;
}

Node* createFallback(Graph* graph, Node* group) {
  Node* fallback =
      graph->create(c10::prim::FallbackGraph, group->inputs(), group->outputs().size());
  auto subgraph = group->g(Subgraph)->copy();
  expandBroadcastingChunks(subgraph->block());  // the interpreter has no operator for it
  torch::jit::removeTensorTypeSpecializations(subgraph->block());
  fallback->g_(Subgraph, subgraph);
  for (size_t i = 0; i < group->outputs().size(); ++i) {
    fallback->output(i)->setType(group->output(i)->type());
  }
  return fallback;
}

void guardGroup(Node* group) {
  Graph* graph = group->owningGraph();
  std::vector<Value*> tensors = tensorInputs(group);

  std::vector<c10::TypePtr> types;
  types.reserve(tensors.size());
  for (const Value* v : tensors) types.push_back(v->type());
  Node* guard = graph->create(typeGuardSymbol(), tensors, 1);
  guard->tys_(torch::jit::attr::types, std::move(types));
  guard->output()->setType(c10::BoolType::get());
  guard->insertBefore(group);

  Node* branch = graph->create(c10::prim::If, {guard->output()}, 0);
  branch->insertBefore(group);
  for (Value* out : group->outputs()) {
    branch->addOutput()->copyMetadata(out);
    out->replaceAllUsesWith(branch->outputs().back());
  }

  torch::jit::Block* fused = branch->addBlock();
  group->moveBefore(fused->return_node());
  for (Value* out : group->outputs()) fused->registerOutput(out);

  torch::jit::Block* fallback_block = branch->addBlock();
  Node* fallback = createFallback(graph, group);
  fallback_block->appendNode(fallback);
  for (Value* out : fallback->outputs()) fallback_block->registerOutput(out);
}

}  // namespace

void guardFusionGroups(GraphPtr& graph) {
  for (Node* group : collectFusionGroups(graph->block())) {
    if (isGuardedGroup(group)) continue;
    if (!hasCompleteTypes(tensorInputs(group))) {
      torch::jit::SubgraphUtils::unmergeSubgraph(group);
      continue;
    }
    guardGroup(group);
  }
}

}  // namespace fuser
