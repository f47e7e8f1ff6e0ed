// splitOversizedGroups (seed: AITemplate's split of ops past the parameter limit).
//
// After it runs, no unguarded CUDA group needs more than kCudaParamBytes of kernel
// parameters: a group that would is replaced, at its place, by several groups that read
// the same inputs, each computing a run of the original outputs (what two pieces share
// is computed by both), packed greedily in output order. Users of the old outputs read
// the new groups' outputs; the graph stays in topological order, since every new group
// sits where the old one was and reads only what it read.
#include "passes/param_space.h"
#include "value_types.h"

#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <algorithm>
#include <vector>

#include "ops/batch_norm.h"
#include "passes/chunks.h"
#include "passes/concat.h"
#include "passes/fusibility.h"
#include "passes/groups.h"
#include "passes/pipeline.h"
#include "symbols.h"

namespace fuser {
namespace {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

int64_t subgraphParamBytes(const Graph& g) {
  int64_t tensors = 0, scalars = 0, rank = 1;
  for (const Value* in : g.inputs()) {
    if (!isTensor(in)) {
      ++scalars;
      continue;
    }
    rank = std::max(rank, rankOf(in));
    // The kernel reads a group input whole, per chunk, and per channel (batch_norm's
    // statistics: a kernel input of their own, runtime/kernel_graph.h).
    bool whole = false, per_channel = false;
    for (const torch::jit::Use& use : in->uses()) {
      const bool channel = ops::isBatchNormChannelOperand(use.user, use.offset);
      per_channel = per_channel || channel;
      if (!isChunk(use.user) && !channel) whole = true;
    }
    tensors += (whole ? 1 : 0) + (per_channel ? 1 : 0);
  }
  for (const Node* node : g.nodes()) {
    if (!isChunk(node)) continue;
    for (const Value* out : node->outputs()) {
      rank = std::max(rank, rankOf(out));
      tensors += out->uses().empty() ? 0 : 1;
    }
  }
  for (const Value* out : g.outputs()) {
    rank = std::max(rank, rankOf(out));
    tensors += isCat(out->node())
                   ? static_cast<int64_t>(out->node()->input(0)->node()->inputs().size())
                   : 1;
  }
  return cudaParamBytes(tensors, scalars, rank);
}

bool groupOnCuda(const Node* group) {
  auto device = deviceOf(group);
  return device && device->is_cuda();
}

// The subgraph computing only `outputs` (indices into the group's outputs), and which
// of the group's inputs it reads.
std::shared_ptr<Graph> pieceOf(const Node* group, const std::vector<size_t>& outputs,
                               std::vector<size_t>& inputs_read) {
  auto piece = group->g(torch::jit::attr::Subgraph)->copy();
  std::vector<Value*> kept;
  for (size_t o : outputs) kept.push_back(piece->outputs()[o]);
  while (!piece->outputs().empty()) piece->eraseOutput(piece->outputs().size() - 1);
  for (Value* v : kept) piece->registerOutput(v);
  torch::jit::EliminateDeadCode(piece);
  inputs_read.clear();
  for (size_t i = 0; i < piece->inputs().size(); ++i) inputs_read.push_back(i);
  for (size_t i = piece->inputs().size(); i-- > 0;) {
    if (piece->inputs()[i]->uses().empty()) {
      piece->eraseInput(i);
      inputs_read.erase(inputs_read.begin() + static_cast<long>(i));
    }
  }
  return piece;
}

void replaceByPieces(Node* group, const std::vector<std::vector<size_t>>& pieces) {
  Graph* graph = group->owningGraph();
  for (const std::vector<size_t>& outputs : pieces) {
    std::vector<size_t> inputs_read;
    auto subgraph = pieceOf(group, outputs, inputs_read);
    std::vector<Value*> inputs;
    for (size_t i : inputs_read) inputs.push_back(group->input(i));
    Node* piece = graph->create(fusionGroupSymbol(), inputs, outputs.size());
    piece->g_(torch::jit::attr::Subgraph, subgraph);
    piece->insertBefore(group);
    for (size_t k = 0; k < outputs.size(); ++k) {
      piece->output(k)->copyMetadata(group->output(outputs[k]));
      group->output(outputs[k])->replaceAllUsesWith(piece->output(k));
    }
  }
  group->destroy();
}

// Runs of consecutive outputs, each as long as its piece stays within the limit. A run
// of one output is kept even if it does not fit (the partition prevents that).
std::vector<std::vector<size_t>> packOutputs(const Node* group) {
  std::vector<std::vector<size_t>> pieces;
  std::vector<size_t> current, ignored;
  for (size_t o = 0; o < group->outputs().size(); ++o) {
    current.push_back(o);
    if (current.size() > 1 && subgraphParamBytes(*pieceOf(group, current, ignored)) >
                                  kCudaParamBytes) {
      current.pop_back();
      pieces.push_back(current);
      current = {o};
    }
  }
  if (!current.empty()) pieces.push_back(current);
  return pieces;
}

}  // namespace

int64_t cudaParamBytes(int64_t tensors, int64_t scalars, int64_t rank) {
  constexpr int64_t kSlot = 8;
  const int64_t pointers = tensors * kSlot;
  const int64_t sizes_and_strides = rank * kSlot * (1 + tensors);
  return pointers + sizes_and_strides + scalars * kSlot + 2 * kSlot;
}

int64_t groupParamBytes(const Node* group) {
  return subgraphParamBytes(*group->g(torch::jit::attr::Subgraph));
}

void splitOversizedGroups(GraphPtr& graph) {
  for (Node* group : collectFusionGroups(graph->block())) {
    if (isGuardedGroup(group) || !groupOnCuda(group)) continue;
    if (groupParamBytes(group) <= kCudaParamBytes) continue;
    replaceByPieces(group, packOutputs(group));
  }
}

}  // namespace fuser
