// The graph a group's kernel computes: the group's subgraph with every
// prim::ConstantChunk or prim::BroadcastingChunk of group inputs replaced by one kernel
// input per chunk read, so the kernel reads each chunk in place through its view (offset
// and strides; a broadcast input is expanded first, with stride 0), no copy.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <vector>

namespace fuser::runtime {

// Where a kernel input comes from: group input `group_input` itself, or chunk `index`
// of `chunks` along `dim` of it, after expanding it to the broadcast shape of the group
// inputs `broadcast_with` (empty: no broadcast).
struct KernelInputSource {
  size_t group_input = 0;
  int64_t chunks = 0;  // 0: the input itself
  int64_t dim = 0;
  int64_t index = 0;
  std::vector<size_t> broadcast_with;
};

struct KernelGraph {
  std::shared_ptr<torch::jit::Graph> graph;  // its inputs correspond to `sources`
  std::vector<KernelInputSource> sources;
};

KernelGraph makeKernelGraph(torch::jit::Graph& subgraph);

}  // namespace fuser::runtime
