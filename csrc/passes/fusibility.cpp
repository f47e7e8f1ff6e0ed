// Fusibility rules: what the op table, the profiled types and the configuration allow.
#include "passes/fusibility.h"
#include "value_types.h"

#include <algorithm>
#include <array>
#include <unordered_set>

#include "codegen/lowering.h"
#include "config.h"
#include "ops/batch_norm.h"
#include "ops/dropout.h"
#include "ops/op_table.h"
#include "ops/reductions.h"
#include "passes/concat.h"
#include "passes/groups.h"
#include "passes/onednn_beside.h"
#include "passes/param_space.h"
#include "passes/reasons.h"
#include "symbols.h"

namespace fuser {

using torch::jit::Node;
using torch::jit::Value;

namespace {

bool isFusibleDtype(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float:
    case c10::ScalarType::Double:
    case c10::ScalarType::Half:
    case c10::ScalarType::BFloat16:
    case c10::ScalarType::Char:
    case c10::ScalarType::Short:
    case c10::ScalarType::Int:
    case c10::ScalarType::Long:
    case c10::ScalarType::Byte:
    case c10::ScalarType::Bool:
      return true;
    default:
      return false;
  }
}

FusionDecision checkDevice(const c10::Device& device) {
  if (device.is_cpu()) {
    return config().fuse_cpu ? FusionDecision::yes()
                             : FusionDecision::no("device cpu is not in FUSER_DEVICES");
  }
  if (device.is_cuda()) {
    return config().fuse_cuda ? FusionDecision::yes()
                              : FusionDecision::no("device cuda is not in FUSER_DEVICES");
  }
  return FusionDecision::no("device " + device.str() + " has no kernel backend");
}

bool isConstant(const Value* v) { return v->node()->kind() == c10::prim::Constant; }

// Constants a kernel embeds in its source: numbers, bools, None. A tensor constant (a
// frozen weight or bias) is a kernel argument like any tensor.
bool isEmbeddedConstant(const Value* v) {
  return isConstant(v) && !v->type()->cast<c10::TensorType>();
}

// Scalars reach kernels as double, int64 or bool arguments; a `Scalar` (number union)
// would need a type dispatch at run time that the specialization does not cover.
bool isKernelScalarType(const c10::TypePtr& type) {
  auto kind = type->kind();
  return kind == c10::TypeKind::IntType || kind == c10::TypeKind::FloatType ||
         kind == c10::TypeKind::BoolType;
}

// The profiled sizes of an output as the kernel writes it: a cat's are its pieces'.
c10::VaryingShape<int64_t> iterationSizes(const Value* output) {
  const Value* written = isCat(output->node()) ? output->node()->input(0)->node()->input(0)
                                               : output;
  auto type = written->type()->cast<c10::TensorType>();
  return type ? type->sizes() : c10::VaryingShape<int64_t>();
}

std::string shapeText(const c10::VaryingShape<int64_t>& shape) {
  std::string out = "[";
  const auto& dims = *shape.sizes();
  for (size_t d = 0; d < dims.size(); ++d) {
    out += (d ? ", " : "") + (dims[d] ? std::to_string(*dims[d]) : std::string("?"));
  }
  return out + "]";
}

// Different when both ranks are known and differ, or some dimension is known in both
// and differs.
bool shapesDiffer(const c10::VaryingShape<int64_t>& a, const c10::VaryingShape<int64_t>& b) {
  if (!a.size() || !b.size()) return false;
  if (*a.size() != *b.size()) return true;
  for (size_t d = 0; d < *a.size(); ++d) {
    if (a[d] && b[d] && *a[d] != *b[d]) return true;
  }
  return false;
}

// The kernel computes the op's result dtype from its operands' (the op table); the
// graph's run computed the profiled one. They differ where the dispatcher changed the op:
// a scripted function called under torch.autocast with TorchScript's autocast pass off
// (or with ops that pass leaves alone) runs, say, exp on CUDA in float32.
FusionDecision checkProfiledResultDtype(const Node* node, c10::DeviceType device) {
  if (node->outputs().size() != 1) return FusionDecision::yes();
  auto profiled = node->output()->type()->expectRef<c10::TensorType>().scalarType();
  auto rule = codegen::tableResultDtype(node, device);
  if (!profiled || !rule || *profiled == *rule) return FusionDecision::yes();
  return FusionDecision::no(std::string("its result was profiled as ") +
                            c10::toString(*profiled) + " but the op gives " +
                            c10::toString(*rule) + " for its operands' dtypes (autocast in "
                            "the dispatcher?)");
}

}  // namespace

FusionDecision checkTensorValue(const Value* value) {
  auto type = value->type()->cast<c10::TensorType>();
  std::string name = "%";  // (`"%" + debugName()` draws GCC 12's -Warray-bounds)
  name += value->debugName();
  if (!type) return FusionDecision::no(name + " is not a tensor");
  if (!type->scalarType()) return FusionDecision::no(name + " has no profiled dtype");
  if (!type->device()) return FusionDecision::no(name + " has no profiled device");
  if (!type->dim()) return FusionDecision::no(name + " has no profiled rank");
  if (!isFusibleDtype(*type->scalarType())) {
    return FusionDecision::no(name + " has dtype " +
                              std::string(c10::toString(*type->scalarType())) +
                              ", which kernels do not handle");
  }
  return checkDevice(*type->device());
}

namespace {

// How a reduction over `dims` (not the trailing ones) walks `v` by its profiled layout,
// which decides whether whole-shaped outputs can join it:
// - columns: the last kept dim of size over 1 (the rows' innermost, as the row executor
//   orders kept dims) is the innermost in memory (the last where the layout is unknown).
//   A block of neighbouring rows is walked side by side, and the column kernel stores
//   whole outputs element by element, through any layout.
// - runs: the reduced dims are the innermost in memory, one dense run (a channels-last
//   activation's channels). A row kernel stores each row of a whole output as one run,
//   which eager's layout of it keeps where every operand is laid out so, its reduced
//   dims in the same order in memory (`run_order`, innermost first: the row executor
//   orders a row's dims by one operand's layout and reads every operand's row so).
// - any: an expanded operand (a dim of stride 0) has no layout of its own to decide the
//   walk by, as the row executor takes none from it.
// - neither: rows of several runs, or a value of unknown sizes.
struct RowWalk {
  enum Kind { kAny, kColumns, kRuns, kNeither } kind;
  std::vector<int64_t> run_order;  // kRuns: the reduced dims of size over 1, innermost first
  bool operator==(const RowWalk& other) const {
    return kind == other.kind && run_order == other.run_order;
  }
};

RowWalk rowWalkOf(const Value* v, const std::vector<int64_t>& dims) {
  auto type = v->type()->cast<c10::TensorType>();
  if (!type) return {RowWalk::kNeither, {}};
  auto sizes = type->sizes().concrete_sizes();
  if (!sizes) return {RowWalk::kNeither, {}};
  auto strides = type->strides().concrete_sizes();
  int64_t innermost = -1, last_kept = -1;
  std::vector<std::array<int64_t, 3>> reduced;  // (stride, size, dim) of each reduced dim
  for (int64_t d = static_cast<int64_t>(sizes->size()) - 1; d >= 0; --d) {
    if ((*sizes)[d] == 1) continue;
    if (strides && (*strides)[d] == 0) return {RowWalk::kAny, {}};
    const bool kept = !std::binary_search(dims.begin(), dims.end(), d);
    if (kept && last_kept < 0) last_kept = d;
    if (!kept && strides) reduced.push_back({(*strides)[d], (*sizes)[d], d});
    if (innermost < 0 || (strides && (*strides)[d] < (*strides)[innermost])) innermost = d;
  }
  if (innermost >= 0 && innermost == last_kept) return {RowWalk::kColumns, {}};
  if (!strides || reduced.empty()) return {RowWalk::kNeither, {}};
  std::sort(reduced.begin(), reduced.end());
  RowWalk runs{RowWalk::kRuns, {}};
  int64_t expected = 1;
  for (const auto& [stride, size, d] : reduced) {
    if (stride != expected) return {RowWalk::kNeither, {}};
    expected *= size;
    runs.run_order.push_back(d);
  }
  return runs;
}

}  // namespace

FusionDecision checkFusible(const Node* node) {
  if (isFusionGroup(node)) return FusionDecision::yes();
  if (auto op = ops::checkOpSupported(node); !op) return op;
  const auto r = ops::rowReductionOf(node);
  if (r && r->dims.empty() && r->groups == 0) {
    // Every tensor operand is walked along its trailing dims (layer_norm's input
    // gradient walks its forward input beside the gradient, softmax's backward its output).
    for (const Value* v : node->inputs()) {
      if (ops::rowsAreRuns(v, r->reduced)) continue;
      return FusionDecision::no("its rows (%" + v->debugName() + "'s last " +
                                std::to_string(r->reduced) + " dims) lie apart in memory, as "
                                "a channels-last tensor's H and W do: the row kernel would "
                                "run it interpreted, ATen's op reads it as it is");
    }
  }
  // softmax, log_softmax and layer_norm over rows apart in memory (a dim before the
  // last): the row executor walks neighbouring rows side by side (columns) or each row
  // as one run, and stores the result, contiguous as eager's, in the same walk.
  if (r && !r->dims.empty() && r->result == ops::RowReduction::Result::Whole) {
    const RowWalk in = rowWalkOf(node->input(0), r->dims);
    const RowWalk out = rowWalkOf(node->output(0), r->dims);
    if (in.kind == RowWalk::kNeither) {
      return FusionDecision::no("its rows lie apart in memory, neither neighbouring rows side "
                                "by side nor each row one run: ATen's op reads it as it is");
    }
    // Where the result lays its rows out otherwise, column kernels store it through a
    // tile of each row's elements; a row kernel (rows that are runs in the input) stores
    // whole outputs as runs only.
    if (in.kind != RowWalk::kColumns && !(out == in) && out.kind != RowWalk::kAny &&
        in.kind != RowWalk::kAny) {
      return FusionDecision::no("its result, contiguous as eager's, lays its rows out "
                                "otherwise than its input does: storing it would transpose "
                                "it (a row kernel element by element); ATen copies, "
                                "then normalizes");
    }
  }
  if (isLeftToOneDnn(node)) {
    return FusionDecision::no("left to oneDNN Graph, which fuses it into its " +
                              oneDnnPartner(node) + " partition");
  }

  std::optional<c10::Device> device;
  auto checkOperand = [&](const Value* v) {
    if (auto d = checkTensorValue(v); !d) return d;
    c10::Device here = *v->type()->expectRef<c10::TensorType>().device();
    if (device && *device != here) {
      return FusionDecision::no("operands on different devices (" + device->str() + ", " +
                                here.str() + ")");
    }
    device = here;
    return FusionDecision::yes();
  };

  for (size_t i = 0; i < node->inputs().size(); ++i) {
    const Value* input = node->input(i);
    // _grad_sum_to_size's size and the normalizations' normalized_shape never reach the
    // kernel: the guard pins them, and unfuses a group with a list it cannot pin
    // (guard.cpp, sizeListsFixed).
    const bool pinned_size = ops::sizeListInput(node) == i;
    if (input->type()->cast<c10::TensorType>()) {
      // A constant tensor (a frozen weight) is passed as an argument too: partition
      // hoists it out of the subgraph again (hoistTensorConstants).
      if (auto d = checkOperand(input); !d) return d;
    } else if (!isConstant(input) && !isKernelScalarType(input->type()) && !pinned_size) {
      return FusionDecision::no("%" + input->debugName() + " has type " + input->type()->str() +
                                "; only int, float and bool scalars can be kernel arguments");
    }
  }
  for (const Value* output : node->outputs()) {
    if (auto d = checkOperand(output); !d) return d;
  }
  if (!device) return FusionDecision::yes();
  return checkProfiledResultDtype(node, device->type());
}

std::optional<c10::Device> deviceOf(const Node* node) {
  for (auto values : {node->inputs(), node->outputs()}) {
    for (const Value* v : values) {
      auto type = v->type()->cast<c10::TensorType>();
      if (type && type->device()) return *type->device();
    }
  }
  return std::nullopt;
}

size_t countArgs(const Node* node) {
  std::unordered_set<const Value*> inputs;
  for (const Value* v : node->inputs()) {
    if (!isEmbeddedConstant(v)) inputs.insert(v);
  }
  return inputs.size() + node->outputs().size();
}

FusionDecision checkArgLimit(size_t args) {
  const size_t limit = config().arg_limit.load();
  if (args <= limit) return FusionDecision::yes();
  return FusionDecision::no("would exceed argument limit " + std::to_string(limit) + " (" +
                            std::to_string(args) + " inputs + outputs)");
}

namespace {

// Non-constant inputs of `consumer` and `producer`, less the producer's outputs.
std::unordered_set<const Value*> mergedInputs(const Node* consumer, const Node* producer) {
  std::unordered_set<const Value*> produced(producer->outputs().begin(), producer->outputs().end());
  std::unordered_set<const Value*> inputs;
  for (const Node* node : {consumer, producer}) {
    for (const Value* v : node->inputs()) {
      if (!isEmbeddedConstant(v) && !produced.count(v)) inputs.insert(v);
    }
  }
  return inputs;
}

}  // namespace

size_t countMergedArgs(const Node* consumer, const Node* producer) {
  size_t outputs = consumer->outputs().size();
  for (const Value* v : producer->outputs()) {
    for (const auto& use : v->uses()) {
      if (use.user != consumer) {
        ++outputs;
        break;
      }
    }
  }
  return mergedInputs(consumer, producer).size() + outputs;
}

FusionDecision checkParamSpace(const Node* consumer, const Node* producer) {
  auto device = deviceOf(consumer);
  if (!device || !device->is_cuda()) return FusionDecision::yes();
  int64_t tensors = 1, scalars = 0, rank = 1;  // the inputs, and one output
  for (const Value* v : mergedInputs(consumer, producer)) {
    if (v->type()->cast<c10::TensorType>()) {
      ++tensors;
      rank = std::max(rank, rankOf(v));
    } else {
      ++scalars;
    }
  }
  for (const Node* node : {consumer, producer}) {
    for (const Value* v : node->outputs()) rank = std::max(rank, rankOf(v));
  }
  const int64_t bytes = cudaParamBytes(tensors, scalars, rank);
  if (bytes <= kCudaParamBytes) return FusionDecision::yes();
  return FusionDecision::no("its kernel would take " + std::to_string(bytes) +
                            " bytes of parameters for its inputs, over CUDA's " +
                            std::to_string(kCudaParamBytes));
}

FusionDecision checkOutputShapes(const Node* consumer, const Node* producer) {
  const Value* reference = nullptr;
  if (isFusionGroup(consumer)) {
    auto subgraph = consumer->g(torch::jit::attr::Subgraph);
    if (!subgraph->outputs().empty()) reference = subgraph->outputs()[0];
  } else if (!consumer->outputs().empty()) {
    reference = consumer->output(0);
  }
  if (!reference) return FusionDecision::yes();
  const c10::VaryingShape<int64_t> group_shape = iterationSizes(reference);
  for (const Value* out : producer->outputs()) {
    const bool escapes = std::any_of(out->uses().begin(), out->uses().end(),
                                     [&](const torch::jit::Use& u) { return u.user != consumer; });
    if (!escapes) continue;
    // A value a group produces keeps its profiled type inside the producer's subgraph.
    const Value* inner = out;
    if (isFusionGroup(producer)) {
      inner = producer->g(torch::jit::attr::Subgraph)->outputs()[out->offset()];
    }
    const c10::VaryingShape<int64_t> shape = iterationSizes(inner);
    if (shapesDiffer(shape, group_shape)) {
      return FusionDecision::no("its result %" + out->debugName() + " is read after the group "
                                "and has shape " + shapeText(shape) + ", but the group computes " +
                                shapeText(group_shape) + " (one kernel writes a group's outputs "
                                "over one shape)");
    }
  }
  return FusionDecision::yes();
}

namespace {

std::vector<const Node*> nodesOf(const Node* node) {
  if (!isFusionGroup(node)) return {node};
  std::vector<const Node*> nodes;
  for (const Node* n : node->g(torch::jit::attr::Subgraph)->nodes()) nodes.push_back(n);
  return nodes;
}

// The node inside `node` (a group or not) that computes its output `out`.
const Node* definingNode(const Node* node, const Value* out) {
  if (!isFusionGroup(node)) return node;
  return node->g(torch::jit::attr::Subgraph)->outputs()[out->offset()]->node();
}

// Whether what column sum `n` (a node of `consumer` or `producer`, either a node
// itself or a group holding it) hands out, its result or that result's conversion
// (ops::columnSumResult), would feed a node of the two merged.
bool feedsMergedGroup(const Node* n, const Node* consumer, const Node* producer) {
  const torch::jit::Value* result = ops::columnSumResult(n);
  if (n == consumer) return false;  // its readers are outside the two
  if (n == producer) {
    const bool converted_by_consumer = result != n->output() && result->node() == consumer;
    for (const auto& use : n->output()->uses()) {
      if (use.user == consumer && !converted_by_consumer) return true;
    }
    return false;
  }
  const bool in_producer = isFusionGroup(producer) &&
                           n->owningGraph() == producer->g(torch::jit::attr::Subgraph).get();
  for (const auto& use : result->uses()) {
    if (use.user->kind() != c10::prim::Return) return true;  // a node of its subgraph
    if (!in_producer) continue;
    for (const auto& outer : producer->outputs()[use.offset]->uses()) {
      if (outer.user == consumer) return true;
    }
  }
  return false;
}

std::optional<std::vector<int64_t>> completeSizes(const Value* v) {
  auto type = v->type()->cast<c10::TensorType>();
  if (!type) return std::nullopt;
  return type->sizes().concrete_sizes();
}

}  // namespace

bool holdsBatchNorm(const Node* node) {
  for (const Node* n : nodesOf(node)) {
    if (ops::isBatchNorm(n)) return true;
  }
  return false;
}

bool readsFromOutsideItsGroup(const Node* user, size_t input) {
  // group_norm's weight and bias, read per channel by the row executor.
  if (ops::isGroupNormAffine(user, input)) return true;
  if (!ops::isBatchNorm(user)) return false;
  return input == ops::kBatchNormInput || ops::isBatchNormChannelOperand(user, input);
}

c10::TensorTypePtr completeTensorType(const torch::jit::Value* value) {
  auto type = value->type()->cast<c10::TensorType>();
  if (!type || !type->isComplete()) return nullptr;
  return type;
}

c10::TensorTypePtr completeCudaTypeWithoutGrad(const torch::jit::Value* value) {
  auto type = completeTensorType(value);
  if (!type || type->requiresGrad().value_or(true) || !type->device()->is_cuda()) return nullptr;
  return type;
}

bool isView(const Node* node) {
  return node->kind() == c10::aten::view || node->kind() == c10::aten::reshape;
}

bool permutesToRows(const Node* node) {
  if (node->kind() != c10::aten::permute) return false;
  auto dims = torch::jit::toIValue(node->input(1));
  return dims && dims->isIntList() && dims->toIntVector() == std::vector<int64_t>{0, 2, 3, 1};
}

bool readByFusibleNode(const torch::jit::Value* value) {
  for (const torch::jit::Use& use : value->uses()) {
    if (checkFusible(use.user) && !readsFromOutsideItsGroup(use.user, use.offset)) return true;
  }
  return false;
}

FusionDecision checkOperandsFromOutside(const Node* consumer, const Node* producer) {
  for (const Node* n : nodesOf(consumer)) {
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      if (!readsFromOutsideItsGroup(n, i)) continue;
      const Value* v = n->input(i);
      // Inside a group, the operand is a subgraph input standing for the group's input.
      if (isFusionGroup(consumer) && v->node()->kind() == c10::prim::Param) {
        v = consumer->input(v->offset());
      }
      if (v->node() == producer) {
        return FusionDecision::no(describeNode(n) + " reads its input and per-channel operands "
                                  "from outside its group");
      }
    }
  }
  return FusionDecision::yes();
}

bool reduces(const Node* node) {
  for (const Node* n : nodesOf(node)) {
    const ops::OpEntry* entry = ops::findOp(n);
    if (entry && entry->reduces) return true;
  }
  return false;
}

// The longest row beside which leading-dims sums join (checkRowGroup): a float32 row of
// 16384 is held by 1024 lanes of 16 elements.
constexpr int64_t kMaxColumnSumRow = 16384;

bool columnSumsJoinOn(const std::optional<c10::Device>& device) {
  if (!device) return false;
  return device->is_cuda() ? config().column_sums_cuda : config().column_sums_cpu;
}

std::optional<FusionDecision> checkRowGroup(const Node* consumer, const Node* producer) {
  // Where the two hold a reduction over trailing dims, leading-dims sums of values of
  // its rows join it (config.h: column_sums): the row kernel sums them as it walks.
  // Rows longer than kMaxColumnSumRow are not held in registers, and a kernel that walks
  // them writes the summed values whole for ATen's sum: more traffic than the sums' own
  // column kernel.
  std::optional<ops::RowReduction> trailing;
  if (columnSumsJoinOn(deviceOf(consumer))) {
    for (const Node* side : {consumer, producer}) {
      for (const Node* n : nodesOf(side)) {
        auto r = ops::rowReductionOf(n);
        if (!r || !r->dims.empty() || r->groups != 0 || trailing) continue;
        trailing = r;
        if (auto sizes = completeSizes(n->input(0))) {
          int64_t row = 1;
          for (int64_t d = r->rank - r->reduced; d < r->rank; ++d) row *= (*sizes)[d];
          if (row > kMaxColumnSumRow) trailing = std::nullopt;
        }
      }
    }
  }
  std::vector<const Node*> column_sums;
  std::optional<ops::RowReduction> row;
  const Value* row_input = nullptr;
  std::vector<const Value*> reduced_inputs;
  bool other_ops = false;
  bool draws = false;  // random numbers, numbered by element
  for (const Node* side : {consumer, producer}) {
    for (const Node* n : nodesOf(side)) {
      if (n->kind() == c10::prim::Constant) continue;
      other_ops = other_ops || !ops::findOp(n) || ops::isBatchNorm(n);
      draws = draws || ops::isDropout(n) || n->kind() == philoxDropoutSymbol();
      auto r = ops::rowReductionOf(n);
      if (!r) continue;
      if (trailing && ops::isColumnSumBeside(n, *trailing)) {
        column_sums.push_back(n);
        reduced_inputs.push_back(n->input(0));
        continue;
      }
      if (row && !row->sameDims(*r)) {
        return FusionDecision::no("it reduces over other dims than the group's reductions");
      }
      if (!row) row_input = n->input(0);
      reduced_inputs.push_back(n->input(0));
      row = r;
    }
  }
  if (!row) return std::nullopt;
  if (other_ops) {
    return FusionDecision::no("a group that reduces holds only reductions and elementwise ops");
  }
  // Rows over other dims walk the elements in another order than eager numbers them.
  if (draws && !row->dims.empty()) {
    return FusionDecision::no("dropout does not join reductions over other dims than the "
                              "trailing ones");
  }
  // The row kernel reads each operand's rows as runs (or broadcast along the row); an
  // operand whose rows lie apart (transposed) would run the group interpreted.
  // Tensor constants count too: a group copies them in, and they become its inputs only
  // when the groups are final (hoistTensorConstants).
  if (row->dims.empty() && row->groups == 0) {
    for (const Node* side : {consumer, producer}) {
      std::vector<const Value*> operands(side->inputs().begin(), side->inputs().end());
      for (const Node* n : nodesOf(side)) {
        for (const Value* v : n->inputs()) {
          if (v->node()->kind() == c10::prim::Constant && v->type()->cast<c10::TensorType>()) {
            operands.push_back(v);
          }
        }
      }
      for (const Value* v : operands) {
        if (v->node() == producer || ops::rowsAreRuns(v, row->reduced)) continue;
        return FusionDecision::no("%" + v->debugName() + "'s rows (its last " +
                                  std::to_string(row->reduced) + " dims) lie apart in memory, "
                                  "and a reducing group reads its operands' rows as runs");
      }
    }
  }
  // A reduction that drops its dims gives a value the row kernel cannot broadcast back.
  for (const Value* v : producer->outputs()) {
    auto r = ops::rowReductionOf(definingNode(producer, v));
    if (!r || r->result != ops::RowReduction::Result::DropDims) continue;
    for (const auto& use : v->uses()) {
      if (use.user == consumer) {
        return FusionDecision::no("%" + v->debugName() + " drops its reduced dims, and only "
                                  "reductions that keep them feed other ops in a group");
      }
    }
  }
  // A column sum's result leaves the group: the kernel keeps its partial sums only.
  for (const Node* n : column_sums) {
    if (feedsMergedGroup(n, consumer, producer)) {
      return FusionDecision::no("%" + n->output()->debugName() +
                                " sums over the leading dims beside rows, and such sums feed "
                                "nothing in a group");
    }
  }
  // Outputs have the shape the reductions read, or the reduced one.
  auto shape = completeSizes(row_input);
  if (!shape) return FusionDecision::yes();  // the runtime checks every call
  for (const Value* in : reduced_inputs) {
    auto sizes = completeSizes(in);
    if (sizes && *sizes != *shape) {
      return FusionDecision::no("its reductions would read values of different shapes (%" +
                                in->debugName() + ")");
    }
  }
  ops::RowReduction keeping = *row, dropping = *row;
  keeping.result = ops::RowReduction::Result::KeepDims;
  dropping.result = ops::RowReduction::Result::DropDims;
  const auto kept = ops::reducedSizes(*shape, keeping);
  const auto dropped = ops::reducedSizes(*shape, dropping);
  // Outputs of the shape the reductions read are stored whole; beside reductions over
  // other dims than the trailing ones only where the rows are columns or runs (rowWalkOf),
  // stored through eager's layout of each.
  // Every operand of that shape must agree: the row executor takes its rows' order from
  // the first one read in place with a layout of its own. Nor may such a group take
  // values from a reduction over trailing dims: they would rather join its row kernel,
  // which sums over the leading dims beside its rows (a residual's gradient beside
  // layer_norm's backward: a column group there took a walk more, 6% of the step).
  bool whole_outputs = true;
  if (!row->dims.empty()) {
    RowWalk walk = rowWalkOf(row_input, row->dims);
    auto agree = [&](const Value* v) {
      const RowWalk w = rowWalkOf(v, row->dims);
      if (w.kind == RowWalk::kAny) return;
      if (walk.kind == RowWalk::kAny) walk = w;
      if (!(w == walk)) walk = {RowWalk::kNeither, {}};
    };
    for (const Node* side : {consumer, producer}) {
      for (const Value* v : side->inputs()) {
        if (v->node() == producer) continue;
        auto sizes = completeSizes(v);
        if (sizes && *sizes == *shape) agree(v);
        for (const Node* n : nodesOf(v->node())) {
          auto r = ops::rowReductionOf(n);
          if (r && r->dims.empty() && r->groups == 0) walk = {RowWalk::kNeither, {}};
        }
      }
    }
    whole_outputs = walk.kind != RowWalk::kNeither;
  }
  auto allowed = [&](const Value* v) {
    auto sizes = completeSizes(v);
    return !sizes || (*sizes == *shape && whole_outputs) || *sizes == kept || *sizes == dropped;
  };
  // A reduction of the same dims reading the value outside may join the group next
  // (two reductions of one product: the first merge leaves the product to the second).
  auto joins_later = [&](const torch::jit::Use& use) {
    auto r = ops::rowReductionOf(use.user);
    return !whole_outputs && use.offset == 0 && r && r->sameDims(*row);
  };
  std::vector<std::pair<const Node*, const Value*>> outputs;  // (side, output)
  for (const Value* v : consumer->outputs()) outputs.emplace_back(consumer, v);
  for (const Value* v : producer->outputs()) {
    for (const auto& use : v->uses()) {
      if (use.user != consumer && !joins_later(use)) {
        outputs.emplace_back(producer, v);
        break;
      }
    }
  }
  for (const auto& [side, v] : outputs) {
    // A column sum's result (or its conversion) has the shape of the row's dims, which
    // the row executor sums the kernel's partials into.
    const Node* defining = definingNode(side, v);
    if (ops::isFloatingConversion(defining)) defining = defining->input(0)->node();
    if (std::find(column_sums.begin(), column_sums.end(), defining) != column_sums.end()) continue;
    if (!allowed(v)) {
      return FusionDecision::no("%" + v->debugName() + " would leave a reducing group with " +
                                (whole_outputs ? "neither the shape its reductions read nor "
                                                 "the reduced one"
                                               : "other than the reduced shape (its operands' "
                                                 "layouts do not agree on rows that are "
                                                 "columns or single runs, which a whole "
                                                 "output's layout need not keep)"));
    }
  }
  return FusionDecision::yes();
}

FusionDecision canFuse(const Node* consumer, const Node* producer) {
  if (auto d = checkFusible(consumer); !d) return d;
  if (auto d = checkFusible(producer); !d) return d;
  if (producer->owningBlock() != consumer->owningBlock()) {
    return FusionDecision::no("producer and consumer are in different blocks");
  }
  auto producer_device = deviceOf(producer);
  auto consumer_device = deviceOf(consumer);
  if (producer_device != consumer_device) {
    return FusionDecision::no("different devices (" +
                              (producer_device ? producer_device->str() : "none") + ", " +
                              (consumer_device ? consumer_device->str() : "none") + ")");
  }
  if (auto row = checkRowGroup(consumer, producer)) {
    if (!*row) return *row;
  } else if (auto d = checkOutputShapes(consumer, producer); !d) {
    return d;
  }
  if (auto d = checkOperandsFromOutside(consumer, producer); !d) return d;
  if (auto d = checkParamSpace(consumer, producer); !d) return d;
  return checkArgLimit(countMergedArgs(consumer, producer));
}

}  // namespace fuser
