// CUDA C++ source to a loadable image with NVRTC: SASS (a cubin) for the exact device
// architecture when this NVRTC knows it, else PTX that the driver compiles on load.
#pragma once

#include <string>

#include "runtime/cuda/arch.h"
#include "runtime/cuda/nvrtc_library.h"

namespace fuser::cuda {

// Compiles `source` (self-contained CUDA C++: no #include, extern "C" kernels) with
// -std=c++17 -default-device and without --use_fast_math (results must equal eager
// PyTorch's). Returns a cubin (an ELF image) for exactly `arch` if NVRTC supports it;
// otherwise PTX text for the highest supported architecture below `arch`, for a GPU
// newer than the NVRTC. Both load with cuModuleLoadData; isCubin tells them apart.
// `log_out` gets NVRTC's log (warnings) on success. Throws std::runtime_error when
// NVRTC is unavailable, `arch` is older than every supported one, or compilation fails;
// then what() holds NVRTC's full log and the source lines it names, with their numbers.
std::string compileToCubin(const std::string& source, Arch arch, std::string* log_out = nullptr);

// NVRTC's front end only (-fdevice-syntax-only): `source` parses and type-checks for
// `arch`, in a fifth of compileToCubin's time, but NVVM and ptxas do not run, so limits
// they enforce (static shared memory, registers, parameter space) go unchecked. For
// FUSER_CROSS_COMPILE's front-end depth. Throws as compileToCubin does.
void checkSyntax(const std::string& source, Arch arch);

// Whether an image from compileToCubin is a cubin (else it is PTX text).
inline bool isCubin(const std::string& image) { return image.rfind("\177ELF", 0) == 0; }

}  // namespace fuser::cuda
