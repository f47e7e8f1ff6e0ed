// Chunk nodes and the rewrites that let them join fusion groups.
//
// prim::ConstantChunk[chunks=n, dim=d](x) splits x into n views along d (sizes
// ceil(size/n), the last one smaller, as eager's chunk). prim::BroadcastingChunk[chunks=n,
// dim=d](x1..xk) first broadcasts x1..xk to their common shape, then chunks each; its
// outputs are input-major: output j*n + c is chunk c of input j. The TorchScript
// interpreter has no operator for BroadcastingChunk: outside a group it must be expanded
// (expandBroadcastingChunk); inside a group the kernel reads each chunk as a view.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include "fusion_decision.h"

namespace fuser {

c10::Symbol broadcastingChunkSymbol();

// prim::ConstantChunk or prim::BroadcastingChunk.
bool isChunk(const torch::jit::Node* node);

// Yes when `chunk`'s input `index` is produced by a fusible elementwise node that only
// this chunk reads, so chunk(f(a, b)) may be rewritten as f over chunks of a and b.
FusionDecision checkChunkMovable(const torch::jit::Node* chunk, size_t index);

// Rewrites chunk(..., f(a, b), ...) as BroadcastingChunk(..., a, b) followed by one copy
// of f per chunk; the old chunk and f are destroyed. Requires checkChunkMovable. Returns
// the new BroadcastingChunk, at the old chunk's place.
torch::jit::Node* moveChunkBeforeProducer(torch::jit::Node* chunk, size_t index);

// Replaces a BroadcastingChunk by aten::broadcast_tensors and one ConstantChunk per
// input, which the interpreter runs.
void expandBroadcastingChunk(torch::jit::Node* chunk);

// Expands every BroadcastingChunk of `block` and its sub-blocks (not inside subgraphs).
void expandBroadcastingChunks(torch::jit::Block* block);

}  // namespace fuser
