// What a fusion group looks like in a graph, for the passes that form, guard and count
// groups. A group is a fuser::FusionGroup node; once guarded it sits alone in the true
// block of a prim::If whose condition is a fuser::TypeGuard.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <vector>

namespace fuser {

bool isFusionGroup(const torch::jit::Node* node);

// True when `group` already sits under the guard guardFusionGroups builds, i.e. it was
// formed by an earlier run of the pipeline on this graph.
bool isGuardedGroup(const torch::jit::Node* group);

// Every fusion group in `block` and its sub-blocks, in program order (not inside
// Subgraph attributes).
std::vector<torch::jit::Node*> collectFusionGroups(torch::jit::Block* block);

// Nodes of the group's subgraph other than prim::Constant; layer_norm, softmax,
// log_softmax and sums over leading dims count twice (a row or column kernel alone beats
// or ties ATen's).
size_t countComputeNodes(const torch::jit::Node* group);

// A tensor constant (a frozen weight or bias) that merging cloned into the group's
// subgraph becomes a group input again: kernels read tensors through their arguments.
void hoistTensorConstants(torch::jit::Node* group);

}  // namespace fuser
