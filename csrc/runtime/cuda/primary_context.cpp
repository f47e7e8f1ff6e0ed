// Retains each device's primary context on first use and switches to it for a scope.
// Afterwards: the thread's current context is what it was before the guard.
#include "runtime/cuda/primary_context.h"

#include <map>
#include <mutex>

namespace fuser::cuda {

CUcontext primaryContext(int device_index) {
  // Every launch passes through here: a thread-local copy keeps launching threads off
  // the shared mutex after their first launch on a device.
  thread_local std::map<int, CUcontext> seen_by_thread;
  if (auto it = seen_by_thread.find(device_index); it != seen_by_thread.end()) return it->second;

  static std::mutex mutex;
  static auto* retained = new std::map<int, CUcontext>();  // leaked: never released
  std::lock_guard<std::mutex> lock(mutex);
  auto it = retained->find(device_index);
  if (it == retained->end()) {
    CUcontext ctx = nullptr;
    const CUresult r = driver().devicePrimaryCtxRetain(&ctx, cuDevice(device_index));
    if (r != kCudaSuccess) {
      throwCuError(r,
                   "retaining the primary context of CUDA device " + std::to_string(device_index));
    }
    it = retained->emplace(device_index, ctx).first;
  }
  seen_by_thread.emplace(device_index, it->second);
  return it->second;
}

PrimaryContextGuard::PrimaryContextGuard(int device_index) {
  const DriverApi& api = driver();
  const CUcontext target = primaryContext(device_index);
  checkCu(api.ctxGetCurrent(&previous_), "reading the current CUDA context");
  if (previous_ == target) return;
  if (const CUresult r = api.ctxSetCurrent(target); r != kCudaSuccess) {
    throwCuError(r, "making the primary context of CUDA device " + std::to_string(device_index) +
                        " current");
  }
  switched_ = true;
}

PrimaryContextGuard::~PrimaryContextGuard() {
  // A failed restore cannot be reported from a destructor; the next guard on this
  // thread sets the context it needs anyway.
  if (switched_) driver().ctxSetCurrent(previous_);
}

}  // namespace fuser::cuda
