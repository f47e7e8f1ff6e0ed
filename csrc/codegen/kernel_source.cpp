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
        layout == SourceLayout::SharedRows) {
      const bool broadcast = layout == SourceLayout::BroadcastRows && first >= 0;
      d.access.inner_unit_stride = !broadcast;
      d.access.inner_zero_stride = broadcast;
    }
    if (layout == SourceLayout::SharedRows && first >= 0) d.access.same_strides_as = first;
    if (first < 0) first = tensor;
    ++tensor;
  }
  Kernel kernel = lowerSubgraph(subgraph, inputs, flat ? 1 : 2, flat);
  kernel.name = "fuser_kernel";
  kernel.vectorize = flat;
  return dialect == Dialect::Cpp ? printCppKernel(kernel) : printCudaKernel(kernel);
}

}  // namespace fuser::codegen
