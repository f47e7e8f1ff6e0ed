// The CUDA driver API (libcuda), loaded at run time with dlopen so that the extension
// builds and imports on machines without CUDA, and the per-device facts we read through
// it. We declare the few driver types and entry points we call ourselves instead of
// including cuda.h (no CUDA headers at build time).
// After driverAvailable() returns true, libcuda is loaded, cuInit(0) has succeeded, and
// driver() gives a fully resolved table valid for the rest of the process.
#pragma once

#include <cstddef>
#include <string>

#include "runtime/cuda/arch.h"

namespace fuser::cuda {

// ABI-compatible stand-ins for cuda.h's declarations. Handles are opaque pointers there
// too, so a CUstream from PyTorch passes through as a void*.
using CUresult = int;  // an enum in cuda.h; CUDA_SUCCESS is 0
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;
using CUstream = void*;
constexpr CUresult kCudaSuccess = 0;
// CUstreamCaptureStatus, numbered as in cuda.h.
enum class StreamCaptureStatus : int { kNone = 0, kActive = 1, kInvalidated = 2 };

// The CUfunction_attribute values we set, numbered as in cuda.h.
enum class FunctionAttribute : int {
  kMaxDynamicSharedSizeBytes = 8,  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
};

// The CUdevice_attribute values we read, numbered as in cuda.h.
enum class DeviceAttribute : int {
  kMaxThreadsPerBlock = 1,            // CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK
  kMultiprocessorCount = 16,          // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
  kL2CacheSize = 38,                  // CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE
  kMaxThreadsPerMultiprocessor = 39,  // CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR
  kMaxSharedPerMultiprocessor = 81,  // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
  kComputeCapabilityMajor = 75,       // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
  kComputeCapabilityMinor = 76,       // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
  kMaxSharedPerBlockOptin = 97,  // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
};

// Each member is bound to the exported symbol "cu" + its name capitalized (init is cuInit,
// launchKernel is cuLaunchKernel), or to the versioned symbol noted beside it where cuda.h
// remaps the name. Member names drop the "cu" so that those remapping macros (cuMemAlloc
// -> cuMemAlloc_v2, cuLaunchKernel -> cuLaunchKernel_ptsz) cannot rewrite them in a file
// that also includes cuda.h.
struct DriverApi {
  CUresult (*init)(unsigned flags);
  CUresult (*driverGetVersion)(int* version);
  CUresult (*deviceGetCount)(int* count);
  CUresult (*deviceGet)(CUdevice* device, int ordinal);
  CUresult (*deviceGetAttribute)(int* value, DeviceAttribute attribute, CUdevice device);
  CUresult (*devicePrimaryCtxRetain)(CUcontext* ctx, CUdevice device);
  CUresult (*ctxGetCurrent)(CUcontext* ctx);
  CUresult (*ctxSetCurrent)(CUcontext ctx);
  CUresult (*moduleLoadData)(CUmodule* module, const void* image);
  CUresult (*moduleGetFunction)(CUfunction* function, CUmodule module, const char* name);
  CUresult (*moduleUnload)(CUmodule module);
  CUresult (*launchKernel)(CUfunction function, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                           unsigned block_x, unsigned block_y, unsigned block_z,
                           unsigned shared_bytes, CUstream stream, void** params, void** extra);
  CUresult (*occupancyMaxActiveBlocksPerMultiprocessor)(int* blocks, CUfunction function,
                                                        int block_size, size_t shared_bytes);
  CUresult (*funcSetAttribute)(CUfunction function, FunctionAttribute attribute, int value);
  CUresult (*streamIsCapturing)(CUstream stream, StreamCaptureStatus* status);
  CUresult (*getErrorName)(CUresult result, const char** name);
  CUresult (*getErrorString)(CUresult result, const char** text);
  // Tests use these to check a launch end to end; the runtime allocates through PyTorch.
  CUresult (*memAlloc)(CUdeviceptr* ptr, size_t bytes);              // cuMemAlloc_v2
  CUresult (*memFree)(CUdeviceptr ptr);                              // cuMemFree_v2
  CUresult (*memcpyDtoH)(void* dst, CUdeviceptr src, size_t bytes);  // cuMemcpyDtoH_v2
  CUresult (*ctxSynchronize)();

  int driver_version = 0;  // e.g. 13000 for a CUDA 13.0 driver
  std::string path;        // the file that was loaded, for diagnostics
};

// Whether libcuda.so.1 (else libcuda.so) loads through the dynamic loader's search AND
// cuInit(0) succeeds; `why` gets the reason when not. Decided once per process.
bool driverAvailable(std::string* why = nullptr);

// The loaded table. Throws std::runtime_error saying why when the driver is unavailable.
const DriverApi& driver();

// "CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)" for a result code.
std::string cuErrorText(CUresult result);

// Throws std::runtime_error naming what was being done and the driver's error text.
[[noreturn]] void throwCuError(CUresult result, const std::string& doing);

// throwCuError unless `result` is success. A fixed text keeps launches free of string
// building; where the text needs numbers, test the result and call throwCuError.
inline void checkCu(CUresult result, const char* doing) {
  if (result != kCudaSuccess) throwCuError(result, doing);
}

// The driver's handle for device `device_index`; throws when the index is out of range.
CUdevice cuDevice(int device_index);

struct DeviceInfo {
  Arch arch;
  int sm_count;
  int max_threads_per_block;
  int max_threads_per_sm;
  int l2_bytes;
  int max_shared_per_block;  // bytes a block may take when its kernel asks for them
  int max_shared_per_sm;     // bytes of shared memory a multiprocessor holds
};

// Facts about device `device_index`, read once per device. Throws std::runtime_error
// when the driver is unavailable or the index is out of range.
DeviceInfo deviceInfo(int device_index);

}  // namespace fuser::cuda
