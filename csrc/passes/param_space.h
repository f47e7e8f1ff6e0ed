// CUDA passes a kernel's arguments in a parameter space of kCudaParamBytes: every
// pointer, the sizes, each strided tensor's strides, the scalars. A group whose kernel
// could need more is split (splitOversizedGroups); the partition keeps every group's
// inputs, with one output, within the limit, so the split always succeeds.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <cstdint>

namespace fuser {

// CUDA's kernel parameter limit (cudaLaunchKernel, and NVRTC's check of the argument
// struct), in bytes.
constexpr int64_t kCudaParamBytes = 4096;

// Most parameter bytes a CUDA kernel over `tensors` launch tensors (inputs, chunks and
// cat pieces read or written) and `scalars` scalar arguments of rank at most `rank`
// can take, as codegen/cuda_printer.h lays out FxArgs: a pointer per tensor; the sizes
// and every tensor's strides when the kernel is strided; the scalars; numel and the
// launch's vector count.
int64_t cudaParamBytes(int64_t tensors, int64_t scalars, int64_t rank);

// The parameter bytes of the kernel that `group`'s subgraph compiles to: its chunks
// count once per chunk read, its cats once per piece.
int64_t groupParamBytes(const torch::jit::Node* group);

}  // namespace fuser
