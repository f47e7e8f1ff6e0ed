#include "passes/onednn_beside.h"

#include <torch/csrc/jit/codegen/onednn/interface.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <unordered_map>

#include "config.h"
#include "passes/onednn_hidden_scalars.h"

namespace fuser {
namespace {

using torch::jit::Block;
using torch::jit::Node;

using PassFunction = void (*)(std::shared_ptr<torch::jit::Graph>&);

bool isRawOneDnnPass(const torch::jit::GraphPassEntry& entry) {
  const PassFunction* target = entry.first.target<PassFunction>();
  return target && *target == &torch::jit::fuser::onednn::fuseGraph;
}

// oneDNN Graph's pass, with scalar arithmetic hidden from it (onednn_hidden_scalars.h),
// run on a copy that replaces the graph only when it succeeds. Its pass still throws on
// some graphs; beside us that must not fail the user's call, which then runs with our
// groups alone.
struct GuardedOneDnnPass {
  void operator()(std::shared_ptr<torch::jit::Graph>& graph) const {
    std::shared_ptr<torch::jit::Graph> copy = graph->copy();
    try {
      runOneDnnPassHidingScalars(copy);
    } catch (const std::exception&) {
      return;
    }
    graph = copy;
  }
};


// Guards oneDNN's registered entry in place: its id stays, so the user can still clear it.
void guardOneDnnPass() {
  for (auto& entry : torch::jit::getCustomPrePasses()) {
    if (isRawOneDnnPass(entry)) entry.first = GuardedOneDnnPass();
  }
}

// Set by markOneDnnPatterns on a node oneDNN Graph would fuse with a convolution or
// matmul: the name of that compute op.
const c10::Symbol& leftToOneDnnAttr() {
  static const c10::Symbol s = c10::Symbol::attr("fuser_left_to_onednn");
  return s;
}

// Numbers every node, so nodes of the dry run's copy can be traced back.
const c10::Symbol& nodeTagAttr() {
  static const c10::Symbol s = c10::Symbol::attr("fuser_node_tag");
  return s;
}

bool isComputeOp(const Node* node) {
  static const std::vector<std::string> kinds = {
      "aten::conv1d", "aten::conv2d", "aten::conv3d",  "aten::_convolution",
      "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d",
      "aten::linear", "aten::matmul", "aten::mm",      "aten::bmm",
      "aten::addmm",  "aten::baddbmm"};
  const std::string name = node->kind().toQualString();
  return std::find(kinds.begin(), kinds.end(), name) != kinds.end();
}

void tagNodes(Block* block, int64_t& next, std::unordered_map<int64_t, Node*>& by_tag) {
  for (Node* node : block->nodes()) {
    node->i_(nodeTagAttr(), next);
    by_tag[next++] = node;
    for (Block* sub : node->blocks()) tagNodes(sub, next, by_tag);
  }
}

void untagNodes(Block* block) {
  for (Node* node : block->nodes()) {
    node->removeAttribute(nodeTagAttr());
    for (Block* sub : node->blocks()) untagNodes(sub);
  }
}

// For each oneDNN partition of the dry run that holds a compute op: the tags of its
// other nodes, with the compute op's kind.
void collectPartitions(Block* block, std::unordered_map<int64_t, std::string>& claimed) {
  static const c10::Symbol group = c10::Symbol::fromQualString("prim::oneDNNFusionGroup");
  for (Node* node : block->nodes()) {
    for (Block* sub : node->blocks()) collectPartitions(sub, claimed);
    if (node->kind() != group || !node->hasAttribute(torch::jit::attr::Subgraph)) continue;
    auto subgraph = node->g(torch::jit::attr::Subgraph);
    const Node* compute = nullptr;
    for (Node* inner : subgraph->nodes()) {
      if (isComputeOp(inner)) compute = inner;
    }
    if (!compute) continue;  // an elementwise-only partition: ours to take
    for (Node* inner : subgraph->nodes()) {
      if (inner != compute && inner->hasAttribute(nodeTagAttr())) {
        claimed[inner->i(nodeTagAttr())] = compute->kind().toQualString();
      }
    }
  }
}

}  // namespace

void unguardOneDnnPass() {
  for (auto& entry : torch::jit::getCustomPrePasses()) {
    if (entry.first.target<GuardedOneDnnPass>() != nullptr) {
      entry.first = &torch::jit::fuser::onednn::fuseGraph;
    }
  }
}

bool isOneDnnPass(const torch::jit::GraphPassEntry& entry) {
  return isRawOneDnnPass(entry) || entry.first.target<GuardedOneDnnPass>() != nullptr;
}

bool oneDnnGraphRegistered() {
  const auto& passes = torch::jit::getCustomPrePasses();
  return std::any_of(passes.begin(), passes.end(), isOneDnnPass);
}

void runBeforeOneDnnGraph(torch::jit::GraphPassNameType ours) {
  auto& passes = torch::jit::getCustomPrePasses();
  auto theirs = std::find_if(passes.begin(), passes.end(), isOneDnnPass);
  auto mine = std::find_if(passes.begin(), passes.end(),
                           [&](const auto& entry) { return entry.second == ours; });
  guardOneDnnPass();
  if (theirs == passes.end() || mine == passes.end() || mine < theirs) return;
  // Both entries keep their ids, so either side can still clear its own pass.
  std::rotate(theirs, mine, mine + 1);
}

bool markOneDnnPatterns(std::shared_ptr<torch::jit::Graph>& graph, bool leave_patterns) {
  if (!oneDnnGraphRegistered()) return false;
  // Replaces a std::function of a later entry of the list TorchScript is iterating over;
  // the list itself keeps its size and order.
  guardOneDnnPass();
  int64_t next = 0;
  std::unordered_map<int64_t, Node*> by_tag;
  tagNodes(graph->block(), next, by_tag);
  // oneDNN's pass rewrites its argument; it sees a copy with the same types, tags kept.
  std::shared_ptr<torch::jit::Graph> dry_run = graph->copy();
  untagNodes(graph->block());
  std::unordered_map<int64_t, std::string> claimed;
  try {
    runOneDnnPassHidingScalars(dry_run);
  } catch (const std::exception&) {
    // oneDNN cannot take this graph: leave it nothing, fuse all we can.
    return false;
  }
  if (!leave_patterns) return true;
  collectPartitions(dry_run->block(), claimed);
  for (const auto& [tag, compute] : claimed) {
    auto it = by_tag.find(tag);
    if (it != by_tag.end()) it->second->s_(leftToOneDnnAttr(), compute);
  }
  return true;
}

bool oneDnnPassSucceeds(const std::shared_ptr<torch::jit::Graph>& graph) {
  std::shared_ptr<torch::jit::Graph> dry_run = graph->copy();
  try {
    runOneDnnPassHidingScalars(dry_run);
  } catch (const std::exception& error) {
    if (config().dump_reasons) {
      std::cerr << "[fuser] oneDNN Graph's pass throws on the fused graph (" << error.what()
                << "); fusing it again with nothing left to oneDNN Graph" << std::endl;
    }
    return false;
  }
  return true;
}

bool isLeftToOneDnn(const Node* node) { return node->hasAttribute(leftToOneDnnAttr()); }

std::string oneDnnPartner(const Node* node) { return node->s(leftToOneDnnAttr()); }

void clearOneDnnMarks(Block* block) {
  for (Node* node : block->nodes()) {
    if (node->hasAttribute(leftToOneDnnAttr())) node->removeAttribute(leftToOneDnnAttr());
    for (Block* sub : node->blocks()) clearOneDnnMarks(sub);
  }
}

}  // namespace fuser
