// The last step of a row kernel's column sums (codegen::TensorOutput::column_partial):
// the kernel stored, per column sum, one row of partial sums per block; one launch adds
// each column's partials up, in float and in a fixed order, and stores the total in
// its output's dtype, rounded once.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace fuser::runtime {

// `partials`: CUDA float [sums, blocks, n]; `outputs`: `sums` contiguous tensors of n
// elements each, of one dtype (float, float16 or bfloat16).
void sumColumnPartials(const at::Tensor& partials, const std::vector<at::Tensor>& outputs);

// Whether one launch can finish into `outputs` (else ATen's sum and a conversion do).
bool columnPartialsFinishable(const std::vector<at::Tensor>& outputs);

// The summing kernel's CUDA source for outputs of `dtype`, and its name.
std::string columnPartialsSource(c10::ScalarType dtype);
inline constexpr const char* kColumnPartialsKernel = "fuser_column_partials";
// Most column sums one launch finishes.
inline constexpr int kMaxColumnSums = 8;

}  // namespace fuser::runtime
