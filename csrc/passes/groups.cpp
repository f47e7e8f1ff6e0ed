// Helpers over fuser::FusionGroup nodes shared by partition.cpp and guard.cpp.
#include "passes/groups.h"

#include <torch/csrc/jit/ir/constants.h>

#include "ops/lowering_rules.h"
#include "ops/reductions.h"
#include "symbols.h"

namespace fuser {

using torch::jit::Block;
using torch::jit::Node;

bool isFusionGroup(const Node* node) { return node->kind() == fusionGroupSymbol(); }

bool isGuardedGroup(const Node* group) {
  const Node* owner = group->owningBlock()->owningNode();
  return owner && owner->kind() == c10::prim::If &&
         owner->input(0)->node()->kind() == typeGuardSymbol();
}

namespace {
void collectInto(Block* block, std::vector<Node*>& out) {
  for (Node* node : block->nodes()) {
    if (isFusionGroup(node)) out.push_back(node);
    for (Block* sub : node->blocks()) collectInto(sub, out);
  }
}
}  // namespace

std::vector<Node*> collectFusionGroups(Block* block) {
  std::vector<Node*> groups;
  collectInto(block, groups);
  return groups;
}

namespace {

// A contiguous() of a CUDA tensor profiled with other strides: a copy our kernels make
// with 16-byte accesses where ATen's strided copy kernel reads element by element
// (attention's q, k and v: passes/matmul_operands.cpp).
bool isStridedCudaCopy(const Node* node) {
  if (node->kind() != c10::aten::contiguous) return false;
  auto type = node->input(0)->type()->cast<c10::TensorType>();
  if (!type || !type->isComplete() || !type->device()->is_cuda()) return false;
  return !ops::isProfiledRowMajor(*type);
}

}  // namespace

namespace {

// A sum whose reduced dims are the leading ones (its rows are columns in memory).
bool isLeadingDimsSum(const Node* node) {
  if (node->kind() != c10::aten::sum && node->kind() != c10::aten::_grad_sum_to_size) {
    return false;
  }
  auto r = ops::rowReductionOf(node);
  if (!r || r->dims.empty()) return false;
  for (size_t i = 0; i < r->dims.size(); ++i) {
    if (r->dims[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

// A float32 sum or mean (adaptive_avg_pool2d to one element per channel is one) over
// the trailing dims of a contiguous CPU tensor: its rows are runs, which the CPU row
// kernel sums as explicit vectors in four accumulators, ahead of ATen's (one core,
// [4, 672, 14, 14] over H and W: 31.6 against 34.0 us; [1, 960, 7, 7]: 8.5 against
// 9.5). ATen's CPU mean is also three kernels (a sum, then fill_ and div_ elementwise).
bool isCpuRowSumOfFloats(const Node* node) {
  if (node->kind() != c10::aten::sum && node->kind() != c10::aten::mean &&
      node->kind() != c10::aten::adaptive_avg_pool2d) {
    return false;
  }
  auto r = ops::rowReductionOf(node);
  if (!r) return false;
  for (size_t i = 0; i < r->dims.size(); ++i) {
    if (r->dims[i] != r->rank - static_cast<int64_t>(r->dims.size() - i)) return false;
  }
  auto in = node->input(0)->type()->cast<c10::TensorType>();
  auto out = node->output()->type()->cast<c10::TensorType>();
  if (!in || !out || !in->isComplete() || !in->device()->is_cpu() ||
      in->scalarType() != c10::ScalarType::Float || out->scalarType() != c10::ScalarType::Float) {
    return false;
  }
  return ops::isProfiledRowMajor(*in);
}

}  // namespace

size_t countComputeNodes(const Node* group) {
  size_t count = 0;
  for (const Node* node : group->g(torch::jit::attr::Subgraph)->nodes()) {
    if (node->kind() == c10::prim::Constant) continue;
    ++count;
    // A row kernel alone beats or ties ATen's normalizations (layer_norm [32768, 1024]
    // on the H100: float32 95 against 111 us, float16 51 against 80; [2048, 1024] on 2
    // CPU cores: 163-180 against 218-231; softmax ties), so they count for two; so do
    // sums over leading dims (columns: a bias's gradient, autodiff's _grad_sum_to_size),
    // which ATen's reductions walk far below the copy bandwidth (2 CPU cores, [64, 128,
    // 768] to [768]: 1283 us against a column kernel's 868), and CPU float sums and
    // means of rows (isCpuRowSumOfFloats). Other reductions alone stay with ATen.
    const c10::Symbol kind = node->kind();
    if (kind == c10::aten::layer_norm || kind == c10::aten::native_layer_norm ||
        kind == c10::aten::softmax || kind == c10::aten::log_softmax || isStridedCudaCopy(node) ||
        isLeadingDimsSum(node) || isCpuRowSumOfFloats(node)) {
      ++count;
    }
  }
  return count;
}

void hoistTensorConstants(Node* group) {
  auto subgraph = group->g(torch::jit::attr::Subgraph);
  std::vector<Node*> constants;
  for (Node* node : subgraph->nodes()) {
    if (node->kind() == c10::prim::Constant && node->output()->type()->cast<c10::TensorType>()) {
      constants.push_back(node);
    }
  }
  torch::jit::WithInsertPoint outside(group);
  for (Node* inner : constants) {
    torch::jit::Value* outer =
        group->owningGraph()->insertConstant(*torch::jit::toIValue(inner->output()));
    outer->setType(inner->output()->type());
    group->addInput(outer);
    torch::jit::Value* param = subgraph->addInput()->setType(inner->output()->type());
    inner->output()->replaceAllUsesWith(param);
    inner->destroy();
  }
}

}  // namespace fuser
