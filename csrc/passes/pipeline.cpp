// The only place that orders the fuser's passes (DESIGN.md section 1).
#include "passes/pipeline.h"

#include <iostream>

#include "config.h"
#include "passes/onednn_beside.h"
#include "passes/report_capture.h"
#include "stats.h"

namespace fuser {

namespace {

// The stages in order. `leave_to_onednn`: nodes oneDNN Graph would fuse with a
// convolution or matmul are left to it. Returns whether oneDNN Graph's pass runs next.
bool runStages(GraphPtr& graph, bool leave_to_onednn) {
  prepareGraph(graph);           // profiled types onto values; in-place ops made functional
  fillScalarWrites(graph);       // x[i:j] = 3: a fill, not a host tensor copied in
  gatherRelayouts(graph);        // element moves with a roll: one gather, found once per sizes
  aliasZeroPads(graph);          // pads of zero hand back their input where none can tell
  cachePerShapeValues(graph);    // tensors built from sizes alone: once per sizes
  moveOpsIntoBranches(graph);    // fusible ops beside an if: into its branches
  bool onednn_next = markOneDnnPatterns(graph, leave_to_onednn);  // its conv/matmul patterns stay
  hoistLoopInvariantProjections(graph);  // a loop's per-step input GEMMs become one
  runConvolutionsChannelsLast(graph);  // CUDA convnets: channels-last weights, eager's exits
  splitBiasEpilogues(graph);     // conv/linear bias becomes an add the next group takes
  sinkAddsPastViews(graph);      // mm -> add(bias) -> view -> gelu: the add after the view
  runSoftmaxBeforeViews(graph);  // add -> view -> softmax(-1): the softmax before the view
  poolBeforeMonotoneOps(graph);  // max_pool(relu(x + b)) computed as relu(max_pool(x) + b)
  useChannelsLastMaxPoolKernel(graph);  // CUDA channels-last max pools: our kernel
  copyMatmulOperands(graph);     // batched matmul operands ATen would copy: copied in groups
  copyReshapeInputs(graph);      // CUDA reshapes ATen would copy: copied in groups, then viewed
  denseAttentionMasks(graph);    // CUDA attention masks the fused kernels refuse: made dense
  convertAttentionMasksOnce(graph);  // a boolean mask read by every layer: converted once
  splitLayerNormBackward(graph); // layer_norm's input gradient: an op a row group takes
  splitBatchNormTraining(graph); // batch statistics: a row group, then an inference batch_norm
  readSizesFromOperands(graph);  // y.size(d) a fusible op reads: from y's operands' sizes
  formFusionGroups(graph);       // fusible producers and chunks merged into consumer groups
  foldLoneBiasAdds(graph);       // CUDA mm + bias add no group took: addmm again
  writeLoneWritesInPlace(graph); // writes made functional that no group took: in place again
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
  return onednn_next;
}

}  // namespace

void fuseGraph(GraphPtr& graph) {
  if (config().killed) return;
  // Where oneDNN Graph's pass comes next, what we left to it must reach it: its pass
  // throws on some graphs that ours produced from graphs it takes (BERT's), and then
  // nobody would fuse the nodes we left. Such a graph is fused again, leaving nothing.
  GraphPtr unfused = oneDnnGraphRegistered() ? graph->copy() : nullptr;
  const int64_t groups_before = stats().groups_formed.load();
  bool onednn_next = runStages(graph, config().leave_to_onednn);
  if (onednn_next && config().leave_to_onednn && !oneDnnPassSucceeds(graph)) {
    // Only the graph that runs counts, in fuser.stats() as in fuser.report.
    stats().groups_formed -= stats().groups_formed.load() - groups_before;
    discardLastCapturedGraph();
    graph = unfused;
    runStages(graph, /*leave_to_onednn=*/false);
  }
  if (config().dump_graph) std::cerr << "[fuser] fused graph:\n" << *graph << std::endl;
}

}  // namespace fuser
