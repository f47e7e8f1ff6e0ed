// oneDNN Graph's pass as we run it beside ours (passes/onednn_beside.h): with the scalar
// arithmetic of a graph hidden from it, outside autodiff.
//
// oneDNN maps aten::sqrt, aten::exp, ... to its eltwise ops without asking whether the
// input is a tensor, and its graph then refuses the op ("could not add op to the
// graph"), which fails the whole graph. Attention's scale `1.0 / math.sqrt(head)` is
// such an op (in a frozen GPT-2 block the head size comes from x.size()): one of them
// left the block's four linears and two matmuls with no partition, and ATen's addmm
// copying each bias. Wrapped for the pass in a node kind oneDNN does not know, scalar
// arithmetic is a wildcard to it, as any op it does not map; unwrapped after.
//
// Not in autodiff's graphs, where oneDNN's partitions are not safe: hidden there, in a
// GPT-2 block's training step, its partitions of attention's matmuls handed the
// backward's own matmul operands of other sizes (T=32: "Expected size for first two
// dimensions of batch2 tensor") or gave the input a gradient 1.77 off (T=16). There its
// pass sees the graph as it does alone.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace fuser {

// oneDNN Graph's pass on `graph`. Throws what its pass throws; the graph is then half
// rewritten, so callers run it on a copy.
void runOneDnnPass(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace fuser
