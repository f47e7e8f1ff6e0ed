// aten::cat in fusion groups.
//
// `%r = aten::cat(prim::ListConstruct(%x1, ..., %xn), dim)` joins a group when some
// piece is computed by the group, so the kernel writes each piece straight into its
// slice of %r (a narrow() view of one buffer) and no copy follows; a piece the group
// does not compute (a slice of an input, a matmul's result) is copied into its slice by
// the same kernel (rotary embeddings' cat(-x2, x1): one kernel, where ATen takes the neg
// and the cat). The kernel iterates one shape for every value it computes, so the pieces
// must have equal sizes (eager allows them to differ along `dim`; such cats stay outside
// groups). %r is only ever a group output: nothing inside the group reads it, since it
// exists only once the kernel has finished.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <optional>

#include "fusion_decision.h"

namespace fuser {

bool isCat(const torch::jit::Node* node);

// The constant dim of a cat (not wrapped), or nullopt when it is not a constant.
std::optional<int64_t> catDim(const torch::jit::Node* cat);

// Yes when `cat` may start a group: constant dim, a list built right here by
// prim::ListConstruct and read only by the cat, pieces with complete profiled types
// (dtype, device, sizes), all equal, at least one produced by a fusible node of the
// same block.
FusionDecision checkCatFusible(const torch::jit::Node* cat);

// Yes unless merging `producer` into `consumer` would make the consumer read a cat
// result inside the group (the producer is a cat, or a group holding one).
FusionDecision checkCatStaysOutput(const torch::jit::Node* consumer,
                                   const torch::jit::Node* producer);

// Yes unless a cat of `group` has no piece the group computes (all group inputs: it
// would be a copy, as ATen's cat).
FusionDecision checkCatPiecesComputed(const torch::jit::Node* group);

// Copies, inside the group, each cat piece the group does not compute (a group input),
// so the kernel writes it into its slice. For groups that are kept: after it, the copies
// are part of the group.
void copyInputPieces(torch::jit::Node* group);

}  // namespace fuser
