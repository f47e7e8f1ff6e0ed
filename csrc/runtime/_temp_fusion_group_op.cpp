// TEMPORARY (passes branch only; delete at merge, the lead's runtime registers the real
// fuser::FusionGroup operator). Runs a group's subgraph through the TorchScript
// interpreter so that graphs holding groups can be analysed (AliasDb needs a registered
// operator for every node kind) and executed end to end before the runtime lands.
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/custom_operator.h>
#include <torch/csrc/jit/runtime/interpreter.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <memory>

#include "symbols.h"

namespace fuser {
namespace {

torch::jit::Operation createInterpretedGroup(const torch::jit::Node* node) {
  auto code =
      std::make_shared<torch::jit::Code>(node->g(torch::jit::attr::Subgraph), "fuser_temp_group");
  return [code](torch::jit::Stack& stack) { torch::jit::InterpreterState(*code).run(stack); };
}

torch::jit::RegisterOperators registration({torch::jit::Operator(
    fusionGroupSymbol(), createInterpretedGroup, c10::AliasAnalysisKind::PURE_FUNCTION)});

}  // namespace
}  // namespace fuser
