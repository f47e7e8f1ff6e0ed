// A GPU architecture as a compute capability (sm_90 is {9, 0}). Shared by the driver
// layer, which reports a device's, and the NVRTC compiler, which targets one.
#pragma once

#include <string>

namespace fuser::cuda {

struct Arch {
  int major;
  int minor;
};

// NVRTC's and the driver's integer form: {9, 0} -> 90, {12, 1} -> 121.
inline int archCode(Arch arch) { return arch.major * 10 + arch.minor; }

inline std::string archName(Arch arch) { return "sm_" + std::to_string(archCode(arch)); }

}  // namespace fuser::cuda
