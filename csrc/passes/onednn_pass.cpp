#include "passes/onednn_pass.h"

#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/graph_task.h>
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

// Registered so that alias analysis (oneDNN's pass runs it) knows the kind; it never
// runs: runOneDnnPass unwraps every such node before returning.
torch::jit::RegisterOperators register_hidden({torch::jit::Operator(
    hiddenSymbol(),
    [](const Node*) -> torch::jit::Operation {
      return [](torch::jit::Stack&) {
        TORCH_INTERNAL_ASSERT(false, "fuser::HiddenFromOneDnn is unwrapped before any graph runs");
      };
    },
    c10::AliasAnalysisKind::PURE_FUNCTION)});

bool isNumber(const torch::jit::Value* v) {
  const c10::TypeKind kind = v->type()->kind();
  return kind == c10::TypeKind::IntType || kind == c10::TypeKind::FloatType ||
         kind == c10::TypeKind::BoolType || kind == c10::TypeKind::NumberType;
}

// Scalar arithmetic: an aten op from numbers to numbers, without side effects. Nothing
// else: a wrapped op is a pure function to alias analysis, which would let a list's
// append be removed as dead.
bool isScalarArithmetic(const Node* node) {
  if (!node->kind().is_aten() || !node->blocks().empty() || node->hasSideEffects() ||
      node->outputs().empty()) {
    return false;
  }
  for (const torch::jit::Value* v : node->inputs()) {
    if (!isNumber(v)) return false;
  }
  for (const torch::jit::Value* v : node->outputs()) {
    if (!isNumber(v)) return false;
  }
  return true;
}

void hide(Block* block) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* node = *it++;
    for (Block* sub : node->blocks()) hide(sub);
    if (isScalarArithmetic(node)) {
      torch::jit::SubgraphUtils::createSingletonSubgraph(node, hiddenSymbol());
    }
  }
}

void unhide(Block* block) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* node = *it++;
    for (Block* sub : node->blocks()) unhide(sub);
    if (node->kind() == hiddenSymbol()) torch::jit::SubgraphUtils::unmergeSubgraph(node);
  }
}

// Whether the graph being optimized may be autodiff's: its forward is optimized in a
// call made with grad mode on, its backward while the autograd engine runs a backward.
bool mayBeAutodiffs() {
  return c10::GradMode::is_enabled() || torch::autograd::get_current_graph_task_id() != -1;
}

}  // namespace

void runOneDnnPass(std::shared_ptr<torch::jit::Graph>& graph) {
  const bool hiding = !mayBeAutodiffs();
  if (hiding) hide(graph->block());
  torch::jit::fuser::onednn::fuseGraph(graph);
  if (hiding) unhide(graph->block());
}

}  // namespace fuser
