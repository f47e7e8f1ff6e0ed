// Registers the fuser::FusionGroup operator: each node gets its own executor (a row
// executor when the group reduces), shared by every thread that runs the graph.
#include <torch/csrc/jit/runtime/custom_operator.h>
#include <torch/csrc/jit/runtime/operator.h>

#include "runtime/fusion_executor.h"
#include "runtime/row_executor.h"
#include "symbols.h"

namespace fuser::runtime {
namespace {

torch::jit::RegisterOperators register_fusion_group({torch::jit::Operator(
    fusionGroupSymbol(),
    [](const torch::jit::Node* node) -> torch::jit::Operation {
      if (RowExecutor::reduces(*node->g(c10::attr::Subgraph))) {
        auto rows = std::make_shared<RowExecutor>(node);
        return [rows](torch::jit::Stack& stack) { rows->run(stack); };
      }
      auto executor = std::make_shared<FusionExecutor>(node);
      return [executor](torch::jit::Stack& stack) { executor->run(stack); };
    },
    c10::AliasAnalysisKind::PURE_FUNCTION)});

}  // namespace
}  // namespace fuser::runtime
