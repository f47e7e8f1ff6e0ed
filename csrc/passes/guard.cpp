// guardFusionGroups: every group formed by this run gets a run-time type check.
//
// After it runs, each such group reads
//   %ok : bool = fuser::TypeGuard[types=[profiled TensorType of each tensor input]](tensors)
//   %outs = prim::If(%ok)
//     block0(): %r = fuser::FusionGroup[Subgraph=...](inputs)       -> (%r)
//     block1(): %f = prim::FallbackGraph[Subgraph=copy](inputs)      -> (%f)
// and the group's former uses read the If's outputs. A group output read only by
// prim::dtype (autodiff keeps the dtype of each autocast cast's input for its backward)
// leaves the group: the If yields the dtype itself, a constant in the fused branch (the
// guard fixes every dtype in the group) and prim::dtype of the fallback's result in the
// other. A group output that converts a group input to the dtype it has (`x.float()`
// of a float32 x, an autocast cast of a half value) leaves the group too: the fused
// branch yields the input itself, as eager answers such a conversion (same memory and
// strides), and the fallback converts. An int group input that only gives conversions
// their dtype (the backward's `grad.to(self_dtype)`) is pinned: the guard also checks
// that it equals the dtype profiled on those conversions' results (attribute `ints`,
// for inputs after the tensors), and the group's subgraph reads that dtype as a
// constant instead. So is a
// bool read only as batch_norm's `training` or native_dropout's `train` (a module's
// `self.training`), to False; so is an int list read only as _grad_sum_to_size's size
// (autodiff's sum of a broadcast operand's gradient, a bias's), to its result's
// profiled sizes, which fix the dims the group reduces (attribute `lists`), or as
// the normalized_shape of layer_norm or of its input gradient (`x.shape[-1:]`, or
// `self.weight.shape` in the backward), to its weight's profiled sizes. A
// group with such a list that cannot be pinned is unfused. The
// fallback's subgraph is the group's ops, unmodified, with tensor types unspecialized:
// the profiling executor turns it into a function that is profiled and optimized again. A group whose tensor inputs
// lack a complete profiled type (dtype, device, rank) is unfused instead: its kernels
// could not be specialized. stats().groups_formed counts the groups guarded here: the
// groups the graph runs (partition's groups less those unmerged since, plus the pieces
// of split ones).
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/tensorexpr_fuser.h>
#include <torch/csrc/jit/passes/utils/subgraph_utils.h>

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ops/batch_norm.h"
#include "ops/dropout.h"
#include "ops/reductions.h"
#include "passes/chunks.h"
#include "passes/fusibility.h"
#include "passes/groups.h"
#include "passes/lone_writes.h"
#include "passes/pipeline.h"
#include "passes/strided_copies.h"
#include "stats.h"
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
  writeFunctionalWritesInPlace(subgraph->block());  // self's strides, as the kernel's
  torch::jit::removeTensorTypeSpecializations(subgraph->block());
  fallback->g_(Subgraph, subgraph);
  for (size_t i = 0; i < group->outputs().size(); ++i) {
    fallback->output(i)->setType(group->output(i)->type());
  }
  return fallback;
}

// The profiled dtype of a group output whose every use is prim::dtype, if known.
std::optional<c10::ScalarType> dtypeOnlyOutput(const Value* out) {
  if (out->uses().empty()) return std::nullopt;
  for (const auto& use : out->uses()) {
    if (use.user->kind() != c10::prim::dtype) return std::nullopt;
  }
  auto type = out->type()->cast<c10::TensorType>();
  return type ? type->scalarType() : std::nullopt;
}

// Whether every use of `param` is batch_norm's `training` or dropout's `train`
// argument: a module's `self.training`, which the guard pins to False (eval mode), so
// that the kernel normalizes with the running statistics and drops nothing; in training
// the fallback runs. (A switch that only dropout reads was made a branch over two
// groups before guarding, passes/dropout.cpp: one beside batch_norm's remains here.)
bool onlyEvalSwitches(const Value* param) {
  for (const auto& use : param->uses()) {
    const bool batch_norm = ops::isBatchNorm(use.user) && use.offset == ops::kBatchNormTraining;
    const bool dropout = ops::isDropout(use.user) && use.offset == ops::kDropoutTrain;
    if (!batch_norm && !dropout) return false;
  }
  return true;
}

bool isIntListType(const c10::TypePtr& type) {
  c10::TypePtr list = type;
  if (auto optional = type->cast<c10::OptionalType>()) list = optional->getElementType();
  auto as_list = list->cast<c10::ListType>();
  return as_list && as_list->getElementType()->kind() == c10::TypeKind::IntType;
}

// The size list `node` reads as its ops::sizeListInput when that list is pinned:
// _grad_sum_to_size's size (its result's profiled sizes) or the normalizations'
// normalized_shape (their weight's).
std::optional<std::vector<int64_t>> pinnedSizeOf(const Node* node) {
  if (node->kind() == c10::aten::_grad_sum_to_size) return ops::gradSumTarget(node);
  return ops::normalizedShapeOf(node);
}

// The value an int list input read only as such a size list is pinned to: pinnedSizeOf
// each such reader, when they agree.
std::optional<c10::IValue> pinnableSizeList(const Value* param) {
  if (!isIntListType(param->type()) || param->uses().empty()) return std::nullopt;
  std::optional<std::vector<int64_t>> sizes;
  for (const auto& use : param->uses()) {
    if (ops::sizeListInput(use.user) != use.offset) return std::nullopt;
    auto target = pinnedSizeOf(use.user);
    if (!target || (sizes && *sizes != *target)) return std::nullopt;
    sizes = std::move(target);
  }
  return c10::IValue(c10::List<int64_t>(*sizes));
}

// Whether every size list of the group (ops::sizeListInput) is known when its kernel
// is built: a constant, or an input the guard pins.
bool sizeListsFixed(const Node* group) {
  for (const Node* n : group->g(Subgraph)->nodes()) {
    const auto index = ops::sizeListInput(n);
    if (!index) continue;
    const Value* size = n->input(*index);
    if (size->node()->kind() == c10::prim::Constant) continue;
    if (size->node()->kind() != c10::prim::Param || !pinnableSizeList(size)) return false;
  }
  return true;
}

// Subgraph inputs (by index) that the guard pins, with their value: ints read only as
// the dtype argument of conversions (or softmax backward's input_dtype) whose results
// share one profiled dtype (that dtype), bools read only as batch_norm's `training` or
// native_dropout's `train` (False), and int lists read only as _grad_sum_to_size's size
// or a normalization's normalized_shape (pinnableSizeList).
std::vector<std::pair<size_t, c10::IValue>> pinnableInputs(const Node* group) {
  std::vector<std::pair<size_t, c10::IValue>> out;
  auto subgraph = group->g(Subgraph);
  for (size_t i = 0; i < subgraph->inputs().size(); ++i) {
    const Value* param = subgraph->inputs()[i];
    if (param->uses().empty()) continue;
    if (auto list = pinnableSizeList(param)) {
      out.emplace_back(i, std::move(*list));
      continue;
    }
    if (param->type()->kind() == c10::TypeKind::BoolType && onlyEvalSwitches(param)) {
      out.emplace_back(i, c10::IValue(false));
      continue;
    }
    if (param->type()->kind() != c10::TypeKind::IntType) continue;
    std::optional<c10::ScalarType> dtype;
    bool pinnable = true;
    for (const auto& use : param->uses()) {
      const c10::FunctionSchema* schema = use.user->maybeSchema();
      auto result = use.user->outputs().size() == 1
                        ? use.user->output()->type()->cast<c10::TensorType>()
                        : nullptr;
      const bool dtype_argument =
          schema && use.offset < schema->arguments().size() &&
          (schema->arguments()[use.offset].name() == "dtype" ||
           schema->arguments()[use.offset].name() == "input_dtype");
      if (!dtype_argument || !result ||
          !result->scalarType() || (dtype && *dtype != *result->scalarType())) {
        pinnable = false;
        break;
      }
      dtype = result->scalarType();
    }
    if (pinnable) out.emplace_back(i, c10::IValue(static_cast<int64_t>(*dtype)));
  }
  return out;
}

// The subgraph reads each pinned input as a constant; the group no longer takes it.
void pinInputs(Node* group, const std::vector<std::pair<size_t, c10::IValue>>& pinned) {
  auto subgraph = group->g(Subgraph);
  for (auto it = pinned.rbegin(); it != pinned.rend(); ++it) {
    Value* param = subgraph->inputs()[it->first];
    torch::jit::WithInsertPoint at(subgraph->nodes().front());
    param->replaceAllUsesWith(subgraph->insertConstant(it->second));
    subgraph->eraseInput(it->first);
    group->removeInput(it->first);
  }
}

// Drops output `index` of `group` and the subgraph nodes that only it read.
void eraseGroupOutput(Node* group, size_t index) {
  auto subgraph = group->g(Subgraph);
  subgraph->eraseOutput(index);
  group->eraseOutput(index);
  torch::jit::EliminateDeadCode(subgraph);
}

// Whether `node` is a conversion that eager answers with its input itself when the dtype
// stays: .to (copy False; the partition admits only the input's own device and a
// preserved memory format), type_as, and the autocast casts.
bool isConversionThatMayAlias(const Node* node) {
  static const c10::Symbol to_reduced =
      c10::Symbol::fromQualString("aten::_autocast_to_reduced_precision");
  static const c10::Symbol to_full =
      c10::Symbol::fromQualString("aten::_autocast_to_full_precision");
  const c10::Symbol kind = node->kind();
  if (kind != c10::aten::to && kind != c10::aten::type_as && kind != to_reduced &&
      kind != to_full) {
    return false;
  }
  const c10::FunctionSchema* schema = node->maybeSchema();
  if (!schema) return false;
  if (auto copy = schema->argumentIndexWithName("copy")) {
    auto value = torch::jit::toIValue(node->input(*copy));
    if (!value || !value->isBool() || value->toBool()) return false;
  }
  return true;
}

// The group's value that is `v` of its subgraph, where the group hands it out: the
// group input of a subgraph input, the group output of a subgraph output; else null.
Value* groupValueOf(Node* group, const Value* v) {
  auto subgraph = group->g(Subgraph);
  if (v->node() == subgraph->param_node()) return group->input(v->offset());
  const auto& outputs = subgraph->outputs();
  auto it = std::find(outputs.begin(), outputs.end(), v);
  return it == outputs.end() ? nullptr : group->output(it - outputs.begin());
}

// The node of `v` if it is one that eager answers with its input itself, or may:
// `contiguous`, or a conversion to its input's own dtype.
const Node* aliasingNode(const Value* v) {
  const Node* node = v->node();
  if (node->kind() == c10::aten::contiguous) return node;
  if (!isConversionThatMayAlias(node)) return nullptr;
  auto from = node->input(0)->type()->cast<c10::TensorType>();
  auto to = v->type()->cast<c10::TensorType>();
  if (!from || !to || !from->scalarType() || from->scalarType() != to->scalarType()) {
    return nullptr;
  }
  return node;
}

// Group outputs that eager answers with another value the group hands out (a group
// input, or another output), so that the two are one tensor there, a write to one seen
// in the other:
// - such a conversion of a value whose dtype it keeps: the fused branch yields the value
//   itself (the guard fixes the dtypes, so in that branch the conversion changes
//   nothing), and the group writes no copy; an input keeps its strides, a slice's too;
// - x.contiguous(): eager answers x where x is row-major, else a copy, known only at run
//   time: the fused branch calls ATen's contiguous on the value, which decides so.
// At least one output stays (a group of such outputs alone is unmerged before).
void yieldAliasesAsEager(Node* group, torch::jit::Block* fused) {
  auto subgraph = group->g(Subgraph);
  // What the fused branch has for a subgraph value, where it need not take it from the
  // group: a chain (`x.contiguous().contiguous()`, `x.to(t).to(t)`, returned or not
  // between its links) aliases along, as eager's does. Producers come before their
  // users in the subgraph, so a link's source is settled first.
  std::unordered_map<const Value*, Value*> outer;
  auto valueOf = [&](const Value* v) -> Value* {
    auto it = outer.find(v);
    return it != outer.end() ? it->second : groupValueOf(group, v);
  };
  const auto& outputs = subgraph->outputs();
  for (Node* node : subgraph->nodes()) {
    if (node->outputs().size() != 1 || !aliasingNode(node->output())) continue;
    Value* value = valueOf(node->input(0));
    if (!value) continue;
    if (node->kind() == c10::aten::contiguous) {
      torch::jit::WithInsertPoint before(fused->return_node());
      value = group->owningGraph()->insert(c10::aten::contiguous, {value});
      value->setType(node->output()->type());
    }
    outer[node->output()] = value;
    auto at = std::find(outputs.begin(), outputs.end(), node->output());
    if (at != outputs.end()) {
      fused->return_node()->replaceInputWith(group->output(at - outputs.begin()), value);
    }
  }
  // The outputs nothing reads now: the group writes them no more (one stays).
  for (size_t i = group->outputs().size(); i-- > 0 && group->outputs().size() > 1;) {
    if (!group->output(i)->hasUses()) eraseGroupOutput(group, i);
  }
}

// Whether every output of `group` is a chain of such nodes from a group input: the
// group computes nothing of its own, and ATen's ops, put back, alias as eager's do
// (`x.to(x.dtype)` alone in a group of one would otherwise be a copy).
bool onlyAliasesOfInputs(Node* group) {
  auto subgraph = group->g(Subgraph);
  for (const Value* v : subgraph->outputs()) {
    while (const Node* node = aliasingNode(v)) v = node->input(0);
    if (v->node() != subgraph->param_node()) return false;
  }
  return true;
}

// As at::Tensor::is_contiguous answers: size-1 dims and empty tensors take any stride.
bool rowMajor(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end()) return true;
  int64_t expected = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

// Whether `group` only copies inputs that were profiled strided into row-major order: its
// kernel makes the copies (eager copies too), and the executor leaves a call whose input
// arrives row-major to ATen. Copies of inputs profiled row-major would run there always.
bool copiesStridedInputs(Node* group) {
  auto copied = copiedInputs(*group->g(Subgraph));
  if (!copied) return false;
  for (size_t i : *copied) {
    auto type = group->input(i)->type()->cast<c10::TensorType>();
    if (!type) return false;
    auto sizes = type->sizes().concrete_sizes();
    auto strides = type->strides().concrete_sizes();
    if (!sizes || !strides) return false;
    if (rowMajor(*sizes, *strides)) return false;
  }
  return true;
}

void guardGroup(Node* group) {
  Graph* graph = group->owningGraph();
  std::vector<Value*> tensors = tensorInputs(group);

  std::vector<c10::TypePtr> types;
  types.reserve(tensors.size());
  for (const Value* v : tensors) types.push_back(v->type());
  const auto pinned = pinnableInputs(group);
  std::vector<Value*> checked = tensors;
  std::vector<int64_t> ints;
  for (const auto& [index, value] : pinned) {
    if (value.isIntList()) continue;
    checked.push_back(group->input(index));
    ints.push_back(value.isBool() ? int64_t{value.toBool()} : value.toInt());
  }
  std::vector<int64_t> lists;  // each list's length, then its elements
  for (const auto& [index, value] : pinned) {
    if (!value.isIntList()) continue;
    checked.push_back(group->input(index));
    const std::vector<int64_t> sizes = value.toIntVector();
    lists.push_back(static_cast<int64_t>(sizes.size()));
    lists.insert(lists.end(), sizes.begin(), sizes.end());
  }
  Node* guard = graph->create(typeGuardSymbol(), checked, 1);
  guard->tys_(torch::jit::attr::types, std::move(types));
  if (!ints.empty()) guard->is_(typeGuardIntsAttr(), std::move(ints));
  if (!lists.empty()) guard->is_(typeGuardListsAttr(), std::move(lists));
  guard->output()->setType(c10::BoolType::get());
  guard->insertBefore(group);

  Node* branch = graph->create(c10::prim::If, {guard->output()}, 0);
  branch->insertBefore(group);
  torch::jit::Block* fused = branch->addBlock();
  torch::jit::Block* fallback_block = branch->addBlock();
  Node* fallback = createFallback(graph, group);
  fallback_block->appendNode(fallback);
  group->moveBefore(fused->return_node());

  // Outputs read for their dtype only become int outputs of the If; at least one
  // tensor output stays, so the group keeps a reason to run.
  std::vector<std::optional<c10::ScalarType>> dtype_only;
  size_t tensor_outputs = group->outputs().size();
  for (const Value* out : group->outputs()) {
    dtype_only.push_back(tensor_outputs > 1 ? dtypeOnlyOutput(out) : std::nullopt);
    if (dtype_only.back()) --tensor_outputs;
  }
  for (size_t i = 0; i < group->outputs().size(); ++i) {
    Value* out = group->output(i);
    if (!dtype_only[i]) {
      branch->addOutput()->copyMetadata(out);
      out->replaceAllUsesWith(branch->outputs().back());
      fused->registerOutput(out);
      fallback_block->registerOutput(fallback->output(i));
      continue;
    }
    Value* dtype = branch->addOutput()->setType(c10::IntType::get());
    torch::jit::WithInsertPoint in_fused(fused->return_node());
    fused->registerOutput(graph->insertConstant(static_cast<int64_t>(*dtype_only[i])));
    Node* read = graph->create(c10::prim::dtype, {fallback->output(i)});
    read->output()->setType(c10::IntType::get());
    fallback_block->appendNode(read);
    fallback_block->registerOutput(read->output());
    std::vector<Node*> readers;
    for (const auto& use : out->uses()) readers.push_back(use.user);
    for (Node* reader : readers) {
      reader->output()->replaceAllUsesWith(dtype);
      reader->destroy();
    }
  }
  for (size_t i = group->outputs().size(); i-- > 0;) {
    if (dtype_only[i]) eraseGroupOutput(group, i);
  }
  pinInputs(group, pinned);
  if (!copiesStridedInputs(group)) yieldAliasesAsEager(group, fused);
}

}  // namespace

void guardFusionGroups(GraphPtr& graph) {
  for (Node* group : collectFusionGroups(graph->block())) {
    if (isGuardedGroup(group)) continue;
    if (!hasCompleteTypes(tensorInputs(group)) || !sizeListsFixed(group) ||
        (onlyAliasesOfInputs(group) && !copiesStridedInputs(group))) {
      torch::jit::SubgraphUtils::unmergeSubgraph(group);
      continue;
    }
    guardGroup(group);
    stats().groups_formed++;
  }
}

}  // namespace fuser
