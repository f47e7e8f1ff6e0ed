// Whether tensors stay as they are for the rest of a graph: a stage that hands out one
// tensor for another (a cached value, an input for its copy) needs both never written.
#pragma once

#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/ir.h>

#include <unordered_set>
#include <vector>

namespace fuser {

// Whether no node of `graph` outside `except` writes any of `tensors` or what they may
// alias: in place, or by a write prepareGraph made functional that a later stage may
// make in place again, or by handing one on through an op alias analysis takes for a
// copy but that may return its input (type_as of the same dtype, dropout in eval mode).
bool staysUnwritten(const std::vector<torch::jit::Value*>& tensors, torch::jit::AliasDb& aliases,
                    torch::jit::Graph& graph,
                    const std::unordered_set<const torch::jit::Node*>& except = {});

// Whether no reader could tell `copy` from `source` itself: neither is ever written (as
// staysUnwritten says) and `copy` never leaves the graph (an output, an attribute, a
// list). A stage may then hand out the one for the other (passes/zero_pads.cpp,
// passes/reshape_copies.cpp).
bool copyIndistinguishable(torch::jit::Value* source, torch::jit::Value* copy,
                           torch::jit::AliasDb& aliases, torch::jit::Graph& graph);

// The nodes of `nodes` whose result no reader could tell from their first input
// (copyIndistinguishable), in order; none where alias analysis refuses `graph` (a node
// with no schema).
std::vector<torch::jit::Node*> copiesIndistinguishable(
    const std::shared_ptr<torch::jit::Graph>& graph, const std::vector<torch::jit::Node*>& nodes);

}  // namespace fuser
