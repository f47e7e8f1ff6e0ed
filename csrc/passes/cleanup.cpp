// cleanUpGraph: the last stage.
//
// After it runs: no dead node and no duplicate pure computation is left; shape
// expressions are simplified (shapes.h); constants are pooled; tensor types outside
// fusion groups are unspecialized again (plain `Tensor`), so later TorchScript passes
// and the next profiling run do not trust stale shapes. The
// subgraphs of fusion groups keep their complete profiled types: the runtime specializes
// kernels on them.
#include <torch/csrc/jit/passes/common_subexpression_elimination.h>
#include <torch/csrc/jit/passes/constant_pooling.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/tensorexpr_fuser.h>

#include "passes/pipeline.h"
#include "passes/onednn_beside.h"
#include "passes/shapes.h"

namespace fuser {

void cleanUpGraph(GraphPtr& graph, bool keep_types_for_onednn) {
  torch::jit::EliminateDeadCode(graph);
  torch::jit::EliminateCommonSubexpression(graph);
  simplifyShapeExpressions(graph->block());
  torch::jit::ConstantPooling(graph);
  clearOneDnnMarks(graph->block());
  // Walks blocks only, never Subgraph attributes: group subgraphs keep their types.
  // oneDNN Graph's pass, which runs after ours, needs the types and wipes them itself.
  if (!keep_types_for_onednn) torch::jit::RemoveTensorTypeSpecializations(graph);
}

}  // namespace fuser
