// formFusionGroups: the seed algorithm (SEEDS.md, nvFuser's graph fuser), our own code.
//
// After it runs, in the graph block and every sub-block (prim::If, prim::Loop):
// - fusible nodes (fusibility.h) that alias analysis lets us bring next to each other
//   are merged into fuser::FusionGroup nodes, consumer first, to a fixpoint; then two
//   groups of one kind that read one tensor, neither reading the other (a mean beside a
//   variance; two elementwise groups whose outputs have one shape), are merged as if one
//   produced for the other, and the fixpoint resumes;
// - no group has more than config().arg_limit inputs + outputs;
// - a group's subgraph keeps the profiled types of its values; its inputs are tensors
//   and non-constant int/float/bool scalars; constants are cloned inside; its outputs
//   are the tensors read after the group;
// - a prim::ConstantChunk read only by one group is inside it, chunking a group input
//   (the kernel reads each chunk in place); a chunk of a fusible elementwise result is
//   first moved above that producer as a prim::BroadcastingChunk (chunks.h), so the
//   producer, copied once per chunk, joins the group too;
// - an aten::cat with a piece the group computes is in it, with its prim::ListConstruct,
//   as a group output that nothing inside the group reads (concat.h); its pieces the
//   group does not compute are copied inside it, and a group left with a cat of its
//   inputs only is unmerged again;
// - groups of fewer compute nodes than minGroupSize() (FUSER_MIN_GROUP_SIZE, default 2:
//   single nodes) are dissolved again, and so are the groups after the first
//   FUSER_MAX_GROUPS (when set), each of their nodes recording why;
// - under FUSER_DUMP=reasons, each candidate node left outside every group has printed
//   one line saying why; while a report is captured (report_capture.h) the same reasons
//   are handed to it.
// Groups formed by an earlier run (already guarded) are left as they are.
#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/passes/utils/subgraph_utils.h>

#include <algorithm>
#include <memory>
#include <unordered_map>

#include "config.h"
#include "ops/dropout.h"
#include "passes/chunks.h"
#include "passes/concat.h"
#include "passes/fusibility.h"
#include "passes/groups.h"
#include "passes/pipeline.h"
#include "passes/reasons.h"
#include "passes/type_propagation.h"
#include "passes/report_capture.h"
#include "symbols.h"

namespace fuser {
namespace {

using torch::jit::AliasDb;
using torch::jit::Block;
using torch::jit::Node;
using torch::jit::Value;
namespace SubgraphUtils = torch::jit::SubgraphUtils;

// Nodes whose refusal is worth a line: aten operators touching tensors. Constants,
// list constructions and control flow would only be noise.
bool isCandidate(const Node* node) {
  if (isChunk(node) || node->kind() == c10::aten::cat) return true;
  if (!node->kind().is_aten()) return false;
  for (auto values : {node->inputs(), node->outputs()}) {
    for (const Value* v : values) {
      if (v->type()->cast<c10::TensorType>()) return true;
    }
  }
  return false;
}

class GroupFormer {
 public:
  explicit GroupFormer(const GraphPtr& graph)
      : graph_(graph), alias_db_(std::make_unique<AliasDb>(graph)) {}

  void run() {
    formInBlock(graph_->block());
    finishGroups();
    if (config().dump_reasons || reportCaptureActive()) {
      logUnfused(graph_->block());
      log_.flush();
    }
  }

 private:
  void formInBlock(Block* block) {
    bool changed = true;
    while (changed) {
      changed = false;
      for (auto it = block->nodes().rbegin(); it != block->nodes().rend();) {
        it = growFrom(*it, changed);
      }
      if (!changed) changed = mergeOneSiblingPair(block);
    }
    for (Node* node : block->nodes()) {
      for (Block* sub : node->blocks()) formInBlock(sub);
    }
  }

  // An op whose result may alias an input (`to` its own dtype, `contiguous` of a
  // contiguous tensor) gives a fresh tensor in a group: only where nothing writes to
  // that memory, else a write through one alias would no longer reach the other.
  FusionDecision checkAliasesUnwritten(const Node* node) const {
    const c10::FunctionSchema* schema = node->maybeSchema();
    if (!schema) return FusionDecision::yes();
    const auto& returns = schema->returns();
    if (std::none_of(returns.begin(), returns.end(),
                     [](const c10::Argument& r) { return r.alias_info() != nullptr; })) {
      return FusionDecision::yes();
    }
    for (auto values : {node->inputs(), node->outputs()}) {
      for (const Value* v : values) {
        if (v->type()->cast<c10::TensorType>() && alias_db_->hasWriters(v)) {
          return FusionDecision::no("its result may alias %" + v->debugName() +
                                    ", which an in-place op writes: a group's fresh result "
                                    "would not see the write");
        }
      }
    }
    return FusionDecision::yes();
  }

  // Makes a fusible `node` a group and merges producers into it until none fits.
  // Returns where the reverse scan goes on: the node before the (possibly new) group.
  torch::jit::graph_node_list_iterator growFrom(Node* node, bool& changed) {
    if (node->kind() == c10::aten::cat) return growFromCat(node, changed);
    if (!checkFusible(node)) return ++node->reverseIterator();
    if (FusionDecision unwritten = checkAliasesUnwritten(node); !unwritten) {
      refusals_[describeNode(node)] = unwritten.reason();
      return ++node->reverseIterator();
    }
    if (FusionDecision fits = checkArgLimit(countArgs(node)); !fits) {
      refusals_[describeNode(node)] = fits.reason();
      return ++node->reverseIterator();
    }
    Node* group = isFusionGroup(node) ? node
                                      : SubgraphUtils::createSingletonSubgraphAndUpdateAliasing(
                                            node, fusionGroupSymbol(), *alias_db_);
    while (mergeOneProducer(group)) changed = true;
    return ++group->reverseIterator();
  }

  // Two groups of one kind that read one tensor and neither of which reads the other's
  // results become one. Reducing groups (x.mean(d) beside x.var(d), a BatchNorm's row
  // statistics): the row kernel reads x once for both. Elementwise groups whose outputs
  // have one shape (rotary position embeddings of the query beside those of the key, both
  // reading cos and sin): one kernel, one guard and one launch instead of two. The
  // earlier moves next to the later, as a producer would. Returns whether a pair merged
  // (producers may join it next).
  bool mergeOneSiblingPair(Block* block) {
    auto kind = [&](const Node* n) {
      if (n->owningBlock() != block || !isFusionGroup(n) || isGuardedGroup(n)) {
        return SiblingKind::kNone;
      }
      if (reduces(n)) return SiblingKind::kReducing;
      if (!config().elementwise_siblings) return SiblingKind::kNone;
      return isPlainElementwiseGroup(n) ? SiblingKind::kElementwise : SiblingKind::kNone;
    };
    for (Node* later : block->nodes()) {
      const SiblingKind later_kind = kind(later);
      if (later_kind == SiblingKind::kNone) continue;
      // The tensor may come from an enclosing block (a branch's statistics of the input).
      for (Value* shared : later->inputs()) {
        if (!shared->type()->cast<c10::TensorType>()) continue;
        for (const auto& use : shared->uses()) {
          Node* earlier = use.user;
          if (earlier != later && kind(earlier) == later_kind && earlier->isBefore(later) &&
              mergeSiblings(later, earlier)) {
            return true;
          }
        }
      }
    }
    return false;
  }

  enum class SiblingKind { kNone, kReducing, kElementwise };

  // A group that the flat elementwise kernel runs: no reduction, batch norm, cat or
  // dropout (each has a kernel or a layout of outputs of its own).
  static bool isPlainElementwiseGroup(const Node* group) {
    if (holdsBatchNorm(group)) return false;
    for (const Node* n : group->g(torch::jit::attr::Subgraph)->nodes()) {
      if (isCat(n) || ops::isDropout(n) || ops::isNativeDropout(n)) return false;
    }
    return true;
  }

  bool mergeSiblings(Node* later, Node* earlier) {
    for (const Value* in : later->inputs()) {
      if (in->node() == earlier) return false;  // a producer: the vertical merge decided
    }
    FusionDecision decision = canFuse(later, earlier);
    if (decision && !alias_db_->moveBeforeTopologicallyValid(earlier, later)) {
      decision = FusionDecision::no("alias analysis forbids moving it next to its sibling");
    }
    if (!decision) return false;
    SubgraphUtils::mergeNodeIntoSubgraphAndUpdateAliasing(earlier, later, *alias_db_);
    return true;
  }

  // A cat starts a group together with its list, whose pieces become the group's
  // inputs; their producers then merge as any others.
  torch::jit::graph_node_list_iterator growFromCat(Node* cat, bool& changed) {
    FusionDecision decision = checkCatFusible(cat);
    Node* list = cat->input(0)->node();
    if (decision) decision = checkArgLimit(countMergedArgs(cat, list));
    if (decision && !alias_db_->moveBeforeTopologicallyValid(list, cat)) {
      decision = FusionDecision::no("alias analysis forbids moving its list next to it");
    }
    if (!decision) {
      refusals_[describeNode(cat)] = decision.reason();
      return ++cat->reverseIterator();
    }
    Node* group = SubgraphUtils::createSingletonSubgraphAndUpdateAliasing(
        cat, fusionGroupSymbol(), *alias_db_);
    SubgraphUtils::mergeNodeIntoSubgraphAndUpdateAliasing(list, group, *alias_db_);
    changed = true;
    while (mergeOneProducer(group)) {
    }
    return ++group->reverseIterator();
  }

  // The nodes of the group's block producing its inputs, last first: in `f(a, a + b)`
  // the `a + b` is tried before `a`, so moving it does not block the other.
  std::vector<Node*> producersOf(Node* group) {
    std::vector<Node*> producers;
    for (Value* input : group->inputs()) {
      Node* p = input->node();
      if (p->owningBlock() != group->owningBlock() || p->kind() == c10::prim::Param ||
          p->kind() == c10::prim::Constant) {
        continue;
      }
      if (std::find(producers.begin(), producers.end(), p) == producers.end()) {
        producers.push_back(p);
      }
    }
    std::sort(producers.begin(), producers.end(),
              [](const Node* a, const Node* b) { return a->isAfter(b); });
    return producers;
  }

  bool mergeOneProducer(Node* group) {
    for (Node* producer : producersOf(group)) {
      if (isChunk(producer)) {
        if (reduces(group) || holdsBatchNorm(group)) {
          refusals_[describeNode(producer)] =
              "not merged into its consumer's group: a group that reduces or holds a "
              "batch_norm reads no chunks";
          continue;
        }
        if (moveChunkUp(producer) || mergeChunk(group, producer)) return true;
        continue;
      }
      if (isCat(producer)) {
        refusals_[describeNode(producer)] = checkCatStaysOutput(group, producer).reason();
        continue;
      }
      if (!checkFusible(producer)) continue;  // its own reason is logged at the end
      FusionDecision decision = canFuse(group, producer);
      if (decision) decision = checkAliasesUnwritten(producer);
      if (decision) decision = checkCatStaysOutput(group, producer);
      if (decision && feedsChunkInside(group, producer)) {
        decision = FusionDecision::no(
            "its result is chunked inside the group, and kernels chunk group inputs only");
      }
      // Last, because a valid move is also performed: the producer lands right before
      // the group (what depends on it and can move goes after the group).
      if (decision && !alias_db_->moveBeforeTopologicallyValid(producer, group)) {
        decision = FusionDecision::no(
            "alias analysis forbids moving it next to its consumer (a write in between)");
      }
      if (!decision) {
        refusals_[describeNode(producer)] =
            "not merged into its consumer's group: " + decision.reason();
        continue;
      }
      SubgraphUtils::mergeNodeIntoSubgraphAndUpdateAliasing(producer, group, *alias_db_);
      return true;
    }
    return false;
  }

  // chunk(f(a, b)) -> f(chunks of a, chunks of b), for the first input of `chunk` whose
  // producer allows it. The copies of f are new producers of the consumer group.
  bool moveChunkUp(Node* chunk) {
    for (size_t i = 0; i < chunk->inputs().size(); ++i) {
      FusionDecision decision = checkChunkMovable(chunk, i);
      // The producer's operands are read at the chunk's place from now on: nothing may
      // write them in between.
      if (decision && !alias_db_->moveBeforeTopologicallyValid(chunk->input(i)->node(), chunk)) {
        decision = FusionDecision::no("alias analysis forbids moving the chunk above its input");
      }
      if (!decision) {
        refusals_[describeNode(chunk)] =
            "not moved above its input's producer: " + decision.reason();
        continue;
      }
      moveChunkBeforeProducer(chunk, i);
      // New nodes and values: the incremental updates of SubgraphUtils do not cover them.
      alias_db_ = std::make_unique<AliasDb>(graph_);
      return true;
    }
    return false;
  }

  // A chunk joins the group when the group reads all of its chunks; its inputs become
  // group inputs, which the kernel reads chunk by chunk.
  bool mergeChunk(Node* group, Node* chunk) {
    FusionDecision decision = FusionDecision::yes();
    for (const Value* out : chunk->outputs()) {
      for (const auto& use : out->uses()) {
        if (decision && use.user != group) {
          decision = FusionDecision::no("chunk %" + out->debugName() + " is also read by " +
                                        describeNode(use.user));
        }
      }
    }
    for (const Value* in : chunk->inputs()) {
      if (auto d = checkTensorValue(in); decision && !d) decision = d;
    }
    if (decision && deviceOf(chunk) != deviceOf(group)) {
      decision = FusionDecision::no("the chunk and its consumer are on different devices");
    }
    if (decision) decision = checkArgLimit(countMergedArgs(group, chunk));
    if (decision && !alias_db_->moveBeforeTopologicallyValid(chunk, group)) {
      decision = FusionDecision::no(
          "alias analysis forbids moving it next to its consumer (a write in between)");
    }
    if (!decision) {
      refusals_[describeNode(chunk)] = "not merged into its consumer's group: " + decision.reason();
      return false;
    }
    SubgraphUtils::mergeNodeIntoSubgraphAndUpdateAliasing(chunk, group, *alias_db_);
    return true;
  }

  // True when a value `producer` computes is chunked inside `group`: merging the producer
  // would leave a chunk of a computed value, which kernels do not read.
  static bool feedsChunkInside(Node* group, const Node* producer) {
    auto subgraph = group->g(torch::jit::attr::Subgraph);
    for (size_t i = 0; i < group->inputs().size(); ++i) {
      if (group->input(i)->node() != producer) continue;
      for (const auto& use : subgraph->inputs()[i]->uses()) {
        if (isChunk(use.user)) return true;
      }
    }
    return false;
  }

  // Dissolves groups smaller than the minimum group size (by default singletons: a
  // kernel launch buys nothing over the eager op), groups past the maximum number of
  // groups, and groups whose cat would only copy inputs; counts the groups this run
  // created.
  void finishGroups() {
    const size_t min_size = static_cast<size_t>(minGroupSize());
    const int max_groups = config().max_groups.load();
    int kept = 0;
    for (Node* group : collectFusionGroups(graph_->block())) {
      if (isGuardedGroup(group)) continue;
      if (FusionDecision pieces = checkCatPiecesComputed(group); !pieces) {
        dissolve(group, pieces.reason(), /*cats_only=*/true);
        continue;
      }
      const size_t size = countComputeNodes(group);
      if (size < min_size) {
        // A lone node keeps the more specific reason its merges were refused for.
        if (size == 1 && min_size == 2) {
          SubgraphUtils::unmergeSubgraph(group);
        } else {
          dissolve(group,
                   "its group of " + std::to_string(size) + " node" + (size == 1 ? "" : "s") +
                       " was below the minimum group size " + std::to_string(min_size) +
                       " (FUSER_MIN_GROUP_SIZE)",
                   /*cats_only=*/false);
        }
        continue;
      }
      if (max_groups > 0 && kept >= max_groups) {
        dissolve(group,
                 "its group came after the maximum number of groups " +
                     std::to_string(max_groups) + " (FUSER_MAX_GROUPS)",
                 /*cats_only=*/false);
        continue;
      }
      copyInputPieces(group);
      hoistTensorConstants(group);
      ++kept;
    }
  }

  // Unmerges `group`, recording `reason` for the nodes that come out of it (only its
  // cats when `cats_only`).
  void dissolve(Node* group, const std::string& reason, bool cats_only) {
    Node* before = group->prev();
    Node* after = group->next();
    SubgraphUtils::unmergeSubgraph(group);
    for (Node* node = before->next(); node != after; node = node->next()) {
      if (!cats_only || isCat(node)) refusals_[describeNode(node)] = reason;
    }
  }

  void logUnfused(Block* block) {
    for (Node* node : block->nodes()) {
      for (Block* sub : node->blocks()) logUnfused(sub);
      // An in-place table op left in place has its line from prepare (inplace.cpp).
      if (!isCandidate(node) || functionalEntryOf(node)) continue;
      const bool special = isChunk(node) || node->kind() == c10::aten::cat;
      if (FusionDecision d = special ? FusionDecision::yes() : checkFusible(node); !d) {
        record(node, d.reason());
        continue;
      }
      auto it = refusals_.find(describeNode(node));
      record(node, it != refusals_.end()
                       ? it->second
                       : "no fusible producer or consumer could join it (a group of one "
                         "node is not worth a kernel)");
    }
  }

  void record(Node* node, const std::string& reason) {
    log_.record(node, reason);
    markRefused(node, reason);
  }

  GraphPtr graph_;
  std::unique_ptr<AliasDb> alias_db_;  // rebuilt when a chunk move adds nodes
  // Last refusal per producer, keyed by its text: nodes are cloned and destroyed while
  // merging, so pointers would not stay valid.
  std::unordered_map<std::string, std::string> refusals_;
  ReasonLog log_;
};

}  // namespace

void formFusionGroups(GraphPtr& graph) { GroupFormer(graph).run(); }

}  // namespace fuser
