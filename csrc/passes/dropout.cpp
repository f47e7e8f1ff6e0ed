// Dropout in training (ops/dropout.h): two rewrites of formed groups, before guarding.
//
// After branchOnTrainingSwitches, no group reads a bool input only as dropout's `train`
// (a module's self.training): such a group became prim::If(flag) over two copies of
// it, the flag a constant in each, so eval mode runs its copy kernel and training its
// random one. A flag that batch_norm's `training` also reads stays for the guard to pin
// False (batch statistics are not fused).
//
// After aliasEvalDropouts, an eval-mode native_dropout in a group (train False) reads
// as its input where nothing writes either: the group writes no copy, only the mask of
// ones autodiff saves for the backward.
//
// After drawPhiloxStates, every dropout in a group whose `train` is True is a
// fuser::philox_dropout reading two group inputs, the seed and offset of a
// fuser::philox_state node just before the group: one state per dropout and call,
// drawn from torch's generator, so torch.manual_seed reproduces the masks and the
// backward reads the very mask the forward drew (it is a group output).
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <vector>

#include "ops/dropout.h"
#include "passes/groups.h"
#include "passes/pipeline.h"
#include "symbols.h"

namespace fuser {
namespace {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

// A subgraph input of bool type that only dropout's `train` reads.
int trainingSwitch(const Graph& subgraph) {
  for (size_t i = 0; i < subgraph.inputs().size(); ++i) {
    const Value* param = subgraph.inputs()[i];
    if (param->type()->kind() != c10::TypeKind::BoolType || param->uses().empty()) continue;
    bool only_dropout = true;
    for (const auto& use : param->uses()) {
      only_dropout = only_dropout && ops::isDropout(use.user) && use.offset == ops::kDropoutTrain;
    }
    if (only_dropout) return static_cast<int>(i);
  }
  return -1;
}

// A copy of `group` at the end of `block` whose subgraph reads input `index` as `value`.
Node* copyWithConstantInput(Node* group, torch::jit::Block* block, size_t index, bool value) {
  Graph* graph = group->owningGraph();
  Node* copy = graph->createClone(group, [](Value* v) { return v; });
  copy->g_(c10::attr::Subgraph, group->g(c10::attr::Subgraph)->copy());
  block->appendNode(copy);
  auto subgraph = copy->g(c10::attr::Subgraph);
  Value* param = subgraph->inputs()[index];
  torch::jit::WithInsertPoint at(subgraph->nodes().front());
  param->replaceAllUsesWith(subgraph->insertConstant(value));
  subgraph->eraseInput(index);
  copy->removeInput(index);
  for (size_t o = 0; o < group->outputs().size(); ++o) {
    copy->output(o)->copyMetadata(group->output(o));
    block->registerOutput(copy->output(o));
  }
  return copy;
}

void branchOnSwitch(Node* group, size_t index) {
  Graph* graph = group->owningGraph();
  Node* branch = graph->create(c10::prim::If, {group->input(index)}, 0);
  branch->insertBefore(group);
  torch::jit::Block* training = branch->addBlock();
  torch::jit::Block* eval = branch->addBlock();
  copyWithConstantInput(group, training, index, true);
  copyWithConstantInput(group, eval, index, false);
  for (Value* out : group->outputs()) {
    Value* merged = branch->addOutput()->copyMetadata(out);
    out->replaceAllUsesWith(merged);
  }
  group->destroy();
}

// The device a group's kernels run on: its first tensor input's.
std::optional<c10::Device> groupDevice(const Node* group) {
  for (const Value* in : group->inputs()) {
    auto type = in->type()->cast<c10::TensorType>();
    if (type && type->device()) return *type->device();
  }
  return std::nullopt;
}

// The outer graph's value for subgraph value `v`: a constant (copied out) or an input.
Value* outerValue(Node* group, Value* v) {
  if (auto constant = torch::jit::toIValue(v)) {
    torch::jit::WithInsertPoint before(group);
    return group->owningGraph()->insertConstant(*constant);
  }
  auto subgraph = group->g(c10::attr::Subgraph);
  for (size_t i = 0; i < subgraph->inputs().size(); ++i) {
    if (subgraph->inputs()[i] == v) return group->input(i);
  }
  TORCH_INTERNAL_ASSERT(false, "fuser: dropout's p is neither a constant nor a group input");
}

// Whether every reader of `v` only reads it: the graph's return (through the outputs of
// the prim::If blocks that hold it), fusion groups, and ops whose schema neither
// writes that argument nor returns an alias of it.
bool onlyRead(const Value* v) {
  for (const auto& use : v->uses()) {
    const Node* user = use.user;
    if (user->kind() == c10::prim::Return) {
      const Node* owner = user->owningBlock()->owningNode();
      if (owner && (owner->kind() != c10::prim::If || !onlyRead(owner->output(use.offset)))) {
        return false;
      }
      continue;
    }
    if (isFusionGroup(user)) continue;  // its outputs are fresh tensors
    const c10::FunctionSchema* schema = user->maybeSchema();
    if (!schema || schema->is_mutable() || use.offset >= schema->arguments().size() ||
        schema->arguments()[use.offset].alias_info()) {
      return false;
    }
  }
  return true;
}

// Where `group`'s caller finds subgraph value `v`: the group input it is, the group
// output it already is, or nullptr.
Value* outerValueOf(Node* group, const Value* v) {
  auto subgraph = group->g(c10::attr::Subgraph);
  for (size_t i = 0; i < subgraph->inputs().size(); ++i) {
    if (subgraph->inputs()[i] == v) return group->input(i);
  }
  for (size_t o = 0; o < subgraph->outputs().size(); ++o) {
    if (subgraph->outputs()[o] == v) return group->output(o);
  }
  return nullptr;
}

// Eval-mode native_dropout(x, p, False) in `group`: its output is x itself, as eager's
// aten::dropout answers in eval mode (autodiff's native_dropout copies), where every
// reader of either outside the group only reads it (onlyRead: no in-place op, no view),
// and x has the output's profiled type. An autodiff forward then saves one tensor
// twice, not a tensor and its copy. (A write the caller makes to a returned tensor
// reaches both, as with eager's aliasing dropout.)
void aliasEvalDropout(Node* group, Node* dropout) {
  Value* x = dropout->input(0);
  Value* out = dropout->output(0);
  if (*x->type() != *out->type()) return;
  auto subgraph = group->g(c10::attr::Subgraph);
  std::vector<size_t> positions;
  for (size_t o = 0; o < subgraph->outputs().size(); ++o) {
    if (subgraph->outputs()[o] != out) continue;
    if (!onlyRead(group->output(o))) return;
    positions.push_back(o);
  }
  Value* outer_x = outerValueOf(group, x);
  if (outer_x && !onlyRead(outer_x)) return;
  if (!positions.empty() && !outer_x) {
    subgraph->registerOutput(x);
    outer_x = group->addOutput()->copyMetadata(group->output(positions[0]));
  }
  out->replaceAllUsesWith(x);
  for (auto it = positions.rbegin(); it != positions.rend(); ++it) {
    group->output(*it)->replaceAllUsesWith(outer_x);
    subgraph->eraseOutput(*it);
    group->eraseOutput(*it);
  }
}

void drawStateFor(Node* group, Node* dropout, c10::Device device) {
  Graph* graph = group->owningGraph();
  auto subgraph = group->g(c10::attr::Subgraph);
  Value* p = dropout->input(1);

  torch::jit::WithInsertPoint before(group);
  Node* state = graph->create(philoxStateSymbol(),
                              {graph->insertConstant(device), outerValue(group, p)}, 2);
  state->insertBefore(group);
  std::vector<Value*> params;
  for (Value* out : state->outputs()) {
    out->setType(c10::IntType::get());
    group->addInput(out);
    params.push_back(subgraph->addInput()->setType(c10::IntType::get()));
  }

  // The CPU's aten::dropout rounds its scale to the input's dtype (ops/dropout.cpp).
  const bool scale_in_input_dtype =
      dropout->kind() == c10::aten::dropout && device.type() == c10::DeviceType::CPU;
  torch::jit::WithInsertPoint at(dropout);
  Node* drawn = subgraph->create(
      philoxDropoutSymbol(),
      {dropout->input(0), p, params[0], params[1], subgraph->insertConstant(scale_in_input_dtype)},
      2);
  drawn->insertBefore(dropout);
  drawn->output(0)->copyMetadata(dropout->output(0));
  if (dropout->outputs().size() == 2) {
    drawn->output(1)->copyMetadata(dropout->output(1));
    dropout->output(1)->replaceAllUsesWith(drawn->output(1));
  } else {
    auto x = dropout->input(0)->type()->expect<c10::TensorType>();
    drawn->output(1)->setType(x->withScalarType(c10::ScalarType::Bool));
  }
  dropout->output(0)->replaceAllUsesWith(drawn->output(0));
  dropout->destroy();
}

}  // namespace

void branchOnTrainingSwitches(GraphPtr& graph) {
  // A copy may still have another switch: repeat until none has.
  for (bool changed = true; changed;) {
    changed = false;
    for (Node* group : collectFusionGroups(graph->block())) {
      const int index = trainingSwitch(*group->g(c10::attr::Subgraph));
      if (index < 0) continue;
      branchOnSwitch(group, static_cast<size_t>(index));
      changed = true;
    }
  }
}

void aliasEvalDropouts(GraphPtr& graph) {
  for (Node* group : collectFusionGroups(graph->block())) {
    std::vector<Node*> eval;
    for (Node* node : group->g(c10::attr::Subgraph)->nodes()) {
      if (!ops::isNativeDropout(node)) continue;
      auto train = torch::jit::toIValue(node->input(ops::kDropoutTrain));
      if (train && train->isBool() && !train->toBool()) eval.push_back(node);
    }
    for (Node* dropout : eval) aliasEvalDropout(group, dropout);
    if (eval.empty()) continue;
    // A dropout whose mask nobody reads is gone; a group left with no output too.
    torch::jit::EliminateDeadCode(group->g(c10::attr::Subgraph));
    if (group->outputs().empty()) group->destroy();
  }
}

void drawPhiloxStates(GraphPtr& graph) {
  for (Node* group : collectFusionGroups(graph->block())) {
    std::vector<Node*> random;
    for (Node* node : group->g(c10::attr::Subgraph)->nodes()) {
      if (ops::isRandomDropout(node)) random.push_back(node);
    }
    if (random.empty()) continue;
    auto device = groupDevice(group);
    TORCH_INTERNAL_ASSERT(device, "fuser: a group with dropout has no profiled device");
    for (Node* dropout : random) drawStateFor(group, dropout, *device);
  }
}

}  // namespace fuser
