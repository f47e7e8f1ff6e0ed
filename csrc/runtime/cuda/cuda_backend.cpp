// STUB until the CUDA printer and NVRTC runtime land: CUDA groups run their fallback.
#include "runtime/cuda/cuda_backend.h"

#include <c10/util/Exception.h>

namespace fuser::runtime {

std::shared_ptr<CompiledKernel> compileCudaKernel(const codegen::Kernel& kernel,
                                                  c10::Device device) {
  TORCH_CHECK(false, "fuser: the CUDA backend is not built yet");
}

}  // namespace fuser::runtime
