// Groups that only copy group inputs into row-major order: each output is
// `x.contiguous()` of an input (attention's q, k and v before their matmuls, a mask
// before its broadcast add). Eager's `x.contiguous()` is x itself where x already is
// row-major, which only the call's strides tell: the guard keeps such a group where x
// was profiled strided (guard.cpp), and the executor hands a call whose x is row-major
// to ATen, which answers x (fusion_executor.cpp).
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <optional>
#include <vector>

namespace fuser {

// The subgraph input each output copies, where every node of `subgraph` is a constant or
// `aten::contiguous` of a subgraph input and every output is such a copy; else nullopt.
std::optional<std::vector<size_t>> copiedInputs(const torch::jit::Graph& subgraph);

}  // namespace fuser
