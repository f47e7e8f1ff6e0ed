// oneDNN Graph's pass as we run it beside ours (passes/onednn_beside.h): with the
// graph's scalar arithmetic hidden from it.
//
// oneDNN maps aten::sqrt, aten::exp, ... to its eltwise ops without asking whether the
// input is a tensor, and its graph then refuses the op ("could not add op to the
// graph"), which fails the whole graph. Attention's scale `1.0 / math.sqrt(head)` is
// such an op (in a frozen GPT-2 block the head size comes from x.size()): one of them
// left the block's four linears and two matmuls with no partition, and ATen's addmm
// copying each bias. Wrapped for the pass in a node kind oneDNN does not know, scalar
// arithmetic is a wildcard to it, as any op it does not map; unwrapped after.
//
// Only arithmetic on numbers (int, float, bool, Scalar) is hidden. Hiding every op
// without a tensor, list ops included (autodiff's `_size_if_not_equal`), gave a GPT-2
// block's input a gradient 1.77 off (T=16) and failed its backward's matmul (T=32); why
// was not found, so nothing but numbers is hidden.
//
// A hidden op that feeds a setting oneDNN reads as a constant (a clamp's bound, an elu's
// alpha) now reaches that read where its pass threw at the op before; oneDNN does not
// check that read. No model here has such a setting.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace fuser {

// oneDNN Graph's pass on `graph`, its scalar arithmetic hidden. Throws what its pass
// throws, and when a wrapper outlives it; the graph is then half rewritten, so callers
// run it on a copy.
void runOneDnnPassHidingScalars(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace fuser
