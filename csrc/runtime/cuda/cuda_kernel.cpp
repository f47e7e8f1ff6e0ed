// Module load, function lookup, launch and unload through the driver API.
// Afterwards (constructor): the module is resident on the device until destruction.
#include "runtime/cuda/cuda_kernel.h"

#include "runtime/cuda/nvrtc_compiler.h"
#include "runtime/cuda/primary_context.h"

namespace fuser::cuda {
namespace {

std::string onDevice(const std::string& kernel_name, int device_index) {
  return "kernel '" + kernel_name + "' on CUDA device " + std::to_string(device_index);
}

}  // namespace

LoadedKernel::LoadedKernel(int device_index, const std::string& image,
                           const std::string& kernel_name)
    : device_(device_index), name_(kernel_name) {
  const DriverApi& api = driver();
  PrimaryContextGuard context(device_);
  // c_str(): PTX must reach the driver NUL-terminated; a cubin is read by its ELF sizes.
  if (const CUresult r = api.moduleLoadData(&module_, image.c_str()); r != kCudaSuccess) {
    // The usual cause of a refused PTX image is a driver older than the NVRTC that wrote
    // it (CUDA_ERROR_UNSUPPORTED_PTX_VERSION), so say which kind it was and which driver.
    throwCuError(r, "loading the module (" + std::string(isCubin(image) ? "cubin" : "PTX") +
                        ", driver version " + std::to_string(api.driver_version) + ") of " +
                        onDevice(name_, device_));
  }
  if (const CUresult r = api.moduleGetFunction(&function_, module_, name_.c_str());
      r != kCudaSuccess) {
    api.moduleUnload(module_);
    throwCuError(r, "finding " + onDevice(name_, device_) + " in its module");
  }
}

LoadedKernel::~LoadedKernel() {
  try {
    PrimaryContextGuard context(device_);
    driver().moduleUnload(module_);
  } catch (...) {  // the driver is gone or the context unusable: leak the module
  }
}

void LoadedKernel::launch(unsigned grid_x, unsigned grid_y, unsigned block_x,
                          void** kernel_params, void* stream, unsigned shared_bytes) const {
  PrimaryContextGuard context(device_);
  const CUresult r = driver().launchKernel(function_, grid_x, grid_y, 1, block_x, 1, 1,
                                           shared_bytes, stream, kernel_params, nullptr);
  if (r != kCudaSuccess) {
    throwCuError(r, "launching " + onDevice(name_, device_) + " with grid " +
                        std::to_string(grid_x) + " x " + std::to_string(grid_y) + " x block " +
                        std::to_string(block_x));
  }
}

void LoadedKernel::allowSharedBytes(int bytes) const {
  if (bytes <= allowed_shared_bytes_.load()) return;
  // The attribute only grows, set and recorded under one lock.
  std::lock_guard<std::mutex> lock(allow_mutex_);
  if (bytes <= allowed_shared_bytes_.load()) return;
  PrimaryContextGuard context(device_);
  const CUresult r = driver().funcSetAttribute(
      function_, FunctionAttribute::kMaxDynamicSharedSizeBytes, bytes);
  if (r != kCudaSuccess) {
    throwCuError(r, "allowing " + std::to_string(bytes) + " bytes of dynamic shared memory to " +
                        onDevice(name_, device_));
  }
  allowed_shared_bytes_.store(bytes);
}

int LoadedKernel::residentBlocksPerSm(int block) const {
  PrimaryContextGuard context(device_);
  int blocks = 0;
  const CUresult r =
      driver().occupancyMaxActiveBlocksPerMultiprocessor(&blocks, function_, block, 0);
  if (r != kCudaSuccess) throwCuError(r, "reading the occupancy of " + onDevice(name_, device_));
  return blocks;
}

}  // namespace fuser::cuda
