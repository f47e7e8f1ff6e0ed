// The fusion pass as TorchScript runs it, and each stage it is made of.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace fuser {

using GraphPtr = std::shared_ptr<torch::jit::Graph>;

// Runs after profiling; rewrites fusible regions of `graph` into guarded FusionGroups.
void fuseGraph(GraphPtr& graph);

// The stages, in pipeline order; each file's header comment says what holds after it.
void prepareGraph(GraphPtr& graph);            // prepare.cpp
// onednn_beside.h: markOneDnnPatterns
void fillScalarWrites(GraphPtr& graph);        // scalar_writes.cpp
void gatherRelayouts(GraphPtr& graph);         // relayouts.cpp
void aliasZeroPads(GraphPtr& graph);           // zero_pads.cpp
void cachePerShapeValues(GraphPtr& graph);     // per_shape_values.cpp
void moveOpsIntoBranches(GraphPtr& graph);     // into_branches.cpp
void hoistLoopInvariantProjections(GraphPtr& graph);  // projections.cpp
void runConvolutionsChannelsLast(GraphPtr& graph);  // channels_last.cpp
void splitBiasEpilogues(GraphPtr& graph);      // epilogues.cpp
void sinkAddsPastViews(GraphPtr& graph);       // adds_past_views.cpp
void runSoftmaxBeforeViews(GraphPtr& graph);   // softmax_before_views.cpp
void poolBeforeMonotoneOps(GraphPtr& graph);   // max_pool_first.cpp
void useChannelsLastMaxPoolKernel(GraphPtr& graph);  // max_pool_kernel.cpp
void copyMatmulOperands(GraphPtr& graph);      // matmul_operands.cpp
void copyReshapeInputs(GraphPtr& graph);       // reshape_copies.cpp
void denseAttentionMasks(GraphPtr& graph);     // attention_masks.cpp
void convertAttentionMasksOnce(GraphPtr& graph);  // attention_masks_once.cpp
void splitLayerNormBackward(GraphPtr& graph);  // layer_norm_backward.cpp
void splitBatchNormTraining(GraphPtr& graph);  // batch_norm_training.cpp
void readSizesFromOperands(GraphPtr& graph);   // operand_sizes.cpp
void formFusionGroups(GraphPtr& graph);        // partition.cpp
void foldLoneBiasAdds(GraphPtr& graph);        // lone_bias_adds.cpp
void writeLoneWritesInPlace(GraphPtr& graph);  // lone_writes.cpp
void expandUnfusedChunks(GraphPtr& graph);     // chunks.cpp
void splitOversizedGroups(GraphPtr& graph);    // param_space.cpp
void cancelRoundTrips(GraphPtr& graph);        // round_trips.cpp
void buildShapeExpressions(GraphPtr& graph);   // shapes.cpp
void branchOnTrainingSwitches(GraphPtr& graph);  // dropout.cpp
void aliasEvalDropouts(GraphPtr& graph);       // dropout.cpp
void drawPhiloxStates(GraphPtr& graph);        // dropout.cpp
void guardFusionGroups(GraphPtr& graph);       // guard.cpp
void cleanUpGraph(GraphPtr& graph, bool keep_types_for_onednn = false);  // cleanup.cpp

}  // namespace fuser
