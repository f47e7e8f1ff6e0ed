#include "codegen/kernel_source.h"

#include "codegen/cpp_printer.h"
#include "codegen/cuda_printer.h"

namespace fuser::codegen {

std::string printKernelSource(const torch::jit::Graph& subgraph, std::vector<InputDesc> inputs,
                              Dialect dialect, SourceLayout layout) {
  const bool flat = layout == SourceLayout::Flat;
  int32_t first = -1;
  int32_t tensor = 0;
  for (InputDesc& d : inputs) {
    if (!d.is_tensor) continue;
    d.access.dtype = d.dtype;
    d.access.access = flat ? Access::Flat : Access::Strided;
    if (layout == SourceLayout::Rows || layout == SourceLayout::BroadcastRows ||
        layout == SourceLayout::SharedRows || layout == SourceLayout::FixedRows) {
      const bool broadcast = layout == SourceLayout::BroadcastRows && first >= 0;
      d.access.inner_unit_stride = !broadcast;
      d.access.inner_zero_stride = broadcast;
    }
    if (layout == SourceLayout::FlatBroadcastRows) {
      d.access.access = first < 0 ? Access::Flat : Access::Strided;
      d.access.inner_zero_stride = first >= 0;
    }
    if (layout == SourceLayout::SharedRows && first >= 0) d.access.same_strides_as = first;
    if (layout == SourceLayout::Tiles || layout == SourceLayout::Tiles64) {
      d.access.inner_unit_stride = first < 0;
      d.access.transposed = first >= 0;
    }
    if (first < 0) first = tensor;
    ++tensor;
  }
  const auto device = dialect == Dialect::Cpp ? c10::DeviceType::CPU : c10::DeviceType::CUDA;
  Kernel kernel = lowerSubgraph(subgraph, inputs, flat ? 1 : 2, flat, device);
  kernel.name = "fuser_kernel";
  kernel.vectorize = flat;
  if (layout == SourceLayout::Tiles) kernel.transpose_tile = transposeTileSide(kernel.inputs);
  if (layout == SourceLayout::Tiles64) kernel.transpose_tile = 64;
  kernel.min_blocks_per_sm = minBlocksPerSm(kernel);
  if (layout == SourceLayout::FixedRows) {
    kernel.fixed.sizes = {5, 300};
    kernel.fixed.numel = 5 * 300;
    kernel.fixed.vectors = 1;  // what the runtime writes in for a launch of one vector
    for (int32_t t = 0; t < tensor; ++t) {
      kernel.fixed.strides.insert(kernel.fixed.strides.end(), {300 * int64_t{tensor}, 1});
      kernel.fixed.pointer_base.push_back(0);
      kernel.fixed.pointer_delta.push_back(300 * int64_t{t});
    }
  }
  return dialect == Dialect::Cpp ? printCppKernel(kernel) : printCudaKernel(kernel);
}

}  // namespace fuser::codegen
