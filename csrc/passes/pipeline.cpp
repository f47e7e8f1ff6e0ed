// The only place that orders the fuser's passes (DESIGN.md section 1).
#include "passes/pipeline.h"

#include <iostream>

#include "config.h"
#include "passes/onednn_beside.h"
#include "passes/report_capture.h"

namespace fuser {

void fuseGraph(GraphPtr& graph) {
  if (config().killed) return;
  prepareGraph(graph);           // profiled types onto values; in-place ops made functional
  bool onednn_next = markOneDnnPatterns(graph);  // what oneDNN fuses with a conv/matmul stays
  hoistLoopInvariantProjections(graph);  // a loop's per-step input GEMMs become one
  runConvolutionsChannelsLast(graph);  // CUDA convnets: channels-last weights, eager's exits
  splitBiasEpilogues(graph);     // conv/linear bias becomes an add the next group takes
  poolBeforeMonotoneOps(graph);  // max_pool(relu(x + b)) computed as relu(max_pool(x) + b)
  useChannelsLastMaxPoolKernel(graph);  // CUDA channels-last max pools: our kernel
  copyMatmulOperands(graph);     // batched matmul operands ATen would copy: copied in groups
  splitLayerNormBackward(graph); // layer_norm's input gradient: an op a row group takes
  splitBatchNormTraining(graph); // batch statistics: a row group, then an inference batch_norm
  formFusionGroups(graph);       // fusible producers and chunks merged into consumer groups
  expandUnfusedChunks(graph);    // BroadcastingChunks left outside become broadcast + chunk
  splitOversizedGroups(graph);   // CUDA groups past the kernel parameter space, by outputs
  cancelRoundTrips(graph);       // half -> float -> half in a group reads the half value
  buildShapeExpressions(graph);  // size-only outputs leave their groups
  branchOnTrainingSwitches(graph);  // dropout's self.training: a group copy per value
  aliasEvalDropouts(graph);      // eval-mode native_dropout's output: its input, no copy
  drawPhiloxStates(graph);       // random dropout reads a Philox state drawn per call
  guardFusionGroups(graph);      // TypeGuard + prim::If + prim::FallbackGraph
  captureGraph(graph);           // fuser.report only: a typed copy, refusals attached
  cleanUpGraph(graph, onednn_next);  // DCE, CSE, peephole; types wiped unless oneDNN is next
  if (config().dump_graph) std::cerr << "[fuser] fused graph:\n" << *graph << std::endl;
}

}  // namespace fuser
