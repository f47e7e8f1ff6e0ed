// Scoped use of a device's primary context, the one PyTorch's runtime-API calls use.
// Driver calls that need a current context (module loading, launches) run inside a
// PrimaryContextGuard, so they work on threads that never touched CUDA and leave the
// calling thread's context exactly as they found it.
#pragma once

#include "runtime/cuda/driver_library.h"

namespace fuser::cuda {

// The primary context of device `device_index`, retained once per process and never
// released (PyTorch holds it for the process's life too). Throws std::runtime_error.
CUcontext primaryContext(int device_index);

class PrimaryContextGuard {
 public:
  // Makes the device's primary context current on this thread if it is not already.
  explicit PrimaryContextGuard(int device_index);
  // Restores the previous context; never throws.
  ~PrimaryContextGuard();
  PrimaryContextGuard(const PrimaryContextGuard&) = delete;
  PrimaryContextGuard& operator=(const PrimaryContextGuard&) = delete;

 private:
  CUcontext previous_ = nullptr;
  bool switched_ = false;
};

}  // namespace fuser::cuda
