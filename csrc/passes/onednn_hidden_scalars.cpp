#include "passes/onednn_hidden_scalars.h"

#include <torch/csrc/jit/codegen/onednn/interface.h>
#include <torch/csrc/jit/passes/utils/subgraph_utils.h>
#include <torch/csrc/jit/runtime/custom_operator.h>

namespace fuser {
namespace {

using torch::jit::Block;
using torch::jit::Node;

const c10::Symbol& hiddenSymbol() {
  static const c10::Symbol s = c10::Symbol::fromQualString("fuser::HiddenFromOneDnn");
  return s;
}

// Registered so that alias analysis (oneDNN's pass runs it) knows the kind. It never
// runs: a wrapper that outlived the pass fails the pass instead.
torch::jit::RegisterOperators register_hidden({torch::jit::Operator(
    hiddenSymbol(),
    [](const Node*) -> torch::jit::Operation {
      return [](torch::jit::Stack&) {
        TORCH_INTERNAL_ASSERT(false, "fuser::HiddenFromOneDnn outlived oneDNN Graph's pass");
      };
    },
    c10::AliasAnalysisKind::PURE_FUNCTION)});

bool isNumber(const torch::jit::Value* v) {
  const c10::TypeKind kind = v->type()->kind();
  return kind == c10::TypeKind::IntType || kind == c10::TypeKind::FloatType ||
         kind == c10::TypeKind::BoolType || kind == c10::TypeKind::NumberType;
}

// An aten op from numbers to numbers without side effects.
bool isScalarArithmetic(const Node* node) {
  if (!node->kind().is_aten() || !node->blocks().empty() || node->outputs().empty()) {
    return false;
  }
  for (const torch::jit::Value* v : node->inputs()) {
    if (!isNumber(v)) return false;
  }
  for (const torch::jit::Value* v : node->outputs()) {
    if (!isNumber(v)) return false;
  }
  return !node->hasSideEffects();
}

// Calls `visit` on every node of `block`, a node's own blocks before it; `visit` may
// replace the node it is given.
template <typename Visit>
void visitNodes(Block* block, const Visit& visit) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* node = *it++;
    for (Block* sub : node->blocks()) visitNodes(sub, visit);
    visit(node);
  }
}

void hide(Block* block) {
  visitNodes(block, [](Node* node) {
    if (isScalarArithmetic(node)) {
      torch::jit::SubgraphUtils::createSingletonSubgraph(node, hiddenSymbol());
    }
  });
}

void unhide(Block* block) {
  visitNodes(block, [](Node* node) {
    if (node->kind() == hiddenSymbol()) torch::jit::SubgraphUtils::unmergeSubgraph(node);
  });
}

// Whether a wrapper is left anywhere: in a block, or in a subgraph oneDNN made.
bool holdsWrapper(const Block* block) {
  for (const Node* node : block->nodes()) {
    if (node->kind() == hiddenSymbol()) return true;
    for (const Block* sub : node->blocks()) {
      if (holdsWrapper(sub)) return true;
    }
    if (node->hasAttribute(torch::jit::attr::Subgraph) &&
        holdsWrapper(node->g(torch::jit::attr::Subgraph)->block())) {
      return true;
    }
  }
  return false;
}

}  // namespace

void runOneDnnPassHidingScalars(std::shared_ptr<torch::jit::Graph>& graph) {
  hide(graph->block());
  torch::jit::fuser::onednn::fuseGraph(graph);
  unhide(graph->block());
  TORCH_CHECK(!holdsWrapper(graph->block()),
              "fuser: scalar arithmetic hidden from oneDNN Graph's pass was not unwrapped");
}

}  // namespace fuser
