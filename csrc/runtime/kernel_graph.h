// The graph a group's kernel computes: the group's subgraph with every
// prim::ConstantChunk of a group input replaced by one kernel input per chunk, so the
// kernel reads each chunk in place through its view (offset and strides), no copy.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <vector>

namespace fuser::runtime {

// Where a kernel input comes from: group input `group_input` itself, or chunk `index`
// of `chunks` along `dim` of it.
struct KernelInputSource {
  size_t group_input = 0;
  int64_t chunks = 0;  // 0: the input itself
  int64_t dim = 0;
  int64_t index = 0;
};

struct KernelGraph {
  std::shared_ptr<torch::jit::Graph> graph;  // its inputs correspond to `sources`
  std::vector<KernelInputSource> sources;
};

KernelGraph makeKernelGraph(torch::jit::Graph& subgraph);

}  // namespace fuser::runtime
