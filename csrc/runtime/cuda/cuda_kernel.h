// A compiled kernel loaded on one device: its module (from a cubin or PTX image) and the
// function to launch. Loading and launching run in the device's primary context, the one
// PyTorch uses, and leave the calling thread's current context as they found it.
#pragma once

#include <atomic>
#include <mutex>
#include <string>

#include "runtime/cuda/driver_library.h"

namespace fuser::cuda {

class LoadedKernel {
 public:
  // Loads `image` (from compileToCubin) on device `device_index` and finds the extern "C"
  // function `kernel_name` in it. Throws std::runtime_error with the driver's error text.
  LoadedKernel(int device_index, const std::string& image, const std::string& kernel_name);
  // Unloads the module; never throws (a failure, e.g. after the driver shut down at
  // process exit, leaks the module).
  ~LoadedKernel();
  LoadedKernel(const LoadedKernel&) = delete;
  LoadedKernel& operator=(const LoadedKernel&) = delete;

  // Enqueues a launch of grid_x x grid_y blocks of block_x threads on `stream` (a
  // CUstream; nullptr is the legacy default stream). `kernel_params` is cuLaunchKernel's
  // array of pointers to each argument. Safe to call from several threads at once.
  // Throws std::runtime_error if the launch is refused; faults inside the kernel surface
  // later, at the stream's next synchronization.
  void launch(unsigned grid_x, unsigned grid_y, unsigned block_x, void** kernel_params,
              void* stream, unsigned shared_bytes = 0) const;

  // Lets launches take up to `bytes` of dynamic shared memory (past the 48 KiB a
  // kernel may take without asking, up to the device's opt-in limit). Throws when the
  // driver refuses.
  void allowSharedBytes(int bytes) const;

  // Blocks of `block` threads that can be resident on one multiprocessor at once.
  int residentBlocksPerSm(int block) const;

  int device() const { return device_; }
  const std::string& name() const { return name_; }

 private:
  int device_;
  std::string name_;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  mutable std::atomic<int> allowed_shared_bytes_{0};
  mutable std::mutex allow_mutex_;
};

}  // namespace fuser::cuda
