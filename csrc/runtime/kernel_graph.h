// The graph a group's kernel computes: the group's subgraph with every
// prim::ConstantChunk or prim::BroadcastingChunk of group inputs replaced by one kernel
// input per chunk read, so the kernel reads each chunk in place through its view (offset
// and strides; a broadcast input is expanded first, with stride 0), no copy; and every
// aten::cat output replaced by one kernel output per piece, so the kernel writes each
// piece into its slice of the cat's buffer (a narrow() view), no copy either; and each
// per-channel operand of a batch_norm read through a kernel input of its own that
// places its [C] elements along the channel dim.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <optional>
#include <vector>

namespace fuser::runtime {

// Where a kernel input comes from: group input `group_input` itself, or chunk `index`
// of `chunks` along `dim` of it, after expanding it to the broadcast shape of the group
// inputs `broadcast_with` (empty: no broadcast), or, with `channels_of`, the [C] group
// input read along dim 1 of group input `channels_of` (batch_norm's statistics): viewed
// as [C, 1, ..., 1] with as many ones as that input has dims after its dim 1.
struct KernelInputSource {
  size_t group_input = 0;
  int64_t chunks = 0;  // 0: the input itself
  int64_t dim = 0;
  int64_t index = 0;
  std::vector<size_t> broadcast_with;
  std::optional<size_t> channels_of;
};

// Where a kernel output goes: group output `group_output` itself, or piece `piece` of
// it, the cat of `pieces` equal-sized pieces along `dim`.
struct KernelOutputTarget {
  size_t group_output = 0;
  int64_t pieces = 0;  // 0: the output itself
  int64_t dim = 0;
  int64_t piece = 0;
};

struct KernelGraph {
  std::shared_ptr<torch::jit::Graph> graph;  // inputs match `sources`, outputs `targets`
  std::vector<KernelInputSource> sources;
  std::vector<KernelOutputTarget> targets;
  // The group cannot run as a kernel (a batch_norm whose operands the group computes,
  // which the partition never forms): every call runs the group's ops instead.
  bool interpret_only = false;
};

KernelGraph makeKernelGraph(torch::jit::Graph& subgraph);

}  // namespace fuser::runtime
