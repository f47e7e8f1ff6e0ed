// The only place that orders the fuser's passes (DESIGN.md section 1).
#include "passes/pipeline.h"

#include <iostream>

#include "config.h"
#include "passes/report_capture.h"

namespace fuser {

void fuseGraph(GraphPtr& graph) {
  if (config().killed) return;
  prepareGraph(graph);           // profiled types onto values; in-place ops made functional
  hoistLoopInvariantProjections(graph);  // a loop's per-step input GEMMs become one
  formFusionGroups(graph);       // fusible producers and chunks merged into consumer groups
  expandUnfusedChunks(graph);    // BroadcastingChunks left outside become broadcast + chunk
  splitOversizedGroups(graph);   // CUDA groups past the kernel parameter space, by outputs
  buildShapeExpressions(graph);  // size-only outputs leave their groups
  guardFusionGroups(graph);      // TypeGuard + prim::If + prim::FallbackGraph
  captureGraph(graph);           // fuser.report only: a typed copy, refusals attached
  cleanUpGraph(graph);           // DCE, CSE, peephole; type specializations wiped
  if (config().dump_graph) std::cerr << "[fuser] fused graph:\n" << *graph << std::endl;
}

}  // namespace fuser
