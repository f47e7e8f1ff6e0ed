// Loads libcuda once per process, resolves DriverApi, runs cuInit(0), and caches the
// device count and each device's DeviceInfo. Symbol names follow the real ABI: where
// cuda.h remaps a name to a versioned one (cuMemAlloc -> cuMemAlloc_v2) we bind the
// versioned symbol; the context, module and launch calls we use have no versions.
#include "runtime/cuda/driver_library.h"

#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>

#include "runtime/cuda/library_search.h"

namespace fuser::cuda {
namespace {

// Resolves every entry point; false with the missing names in `why`.
bool resolveDriver(void* handle, DriverApi& api, std::string* why) {
  std::string missing;
  auto need = [&](const char* name, auto& slot) {
    if (!resolveSymbol(handle, name, slot)) missing += std::string(" ") + name;
  };
  need("cuInit", api.init);
  need("cuDriverGetVersion", api.driverGetVersion);
  need("cuDeviceGetCount", api.deviceGetCount);
  need("cuDeviceGet", api.deviceGet);
  need("cuDeviceGetAttribute", api.deviceGetAttribute);
  need("cuDevicePrimaryCtxRetain", api.devicePrimaryCtxRetain);
  need("cuCtxGetCurrent", api.ctxGetCurrent);
  need("cuCtxSetCurrent", api.ctxSetCurrent);
  need("cuModuleLoadData", api.moduleLoadData);
  need("cuModuleGetFunction", api.moduleGetFunction);
  need("cuModuleUnload", api.moduleUnload);
  need("cuLaunchKernel", api.launchKernel);
  need("cuOccupancyMaxActiveBlocksPerMultiprocessor",
       api.occupancyMaxActiveBlocksPerMultiprocessor);
  need("cuFuncSetAttribute", api.funcSetAttribute);
  need("cuStreamIsCapturing", api.streamIsCapturing);
  need("cuGetErrorName", api.getErrorName);
  need("cuGetErrorString", api.getErrorString);
  need("cuMemAlloc_v2", api.memAlloc);
  need("cuMemFree_v2", api.memFree);
  need("cuMemcpyDtoH_v2", api.memcpyDtoH);
  need("cuCtxSynchronize", api.ctxSynchronize);
  if (!missing.empty()) {
    *why = "libcuda lacks" + missing;
    return false;
  }
  api.path = libraryPathOf(reinterpret_cast<const void*>(api.init));
  return true;
}

struct DriverState {
  std::once_flag once;
  const DriverApi* resolved = nullptr;  // symbols bound: enough for error texts
  const DriverApi* usable = nullptr;    // and cuInit(0) succeeded
  std::string failure;
};

DriverState& driverState() {
  static auto* s = new DriverState();  // leaked: kernels may unload during static destruction
  return *s;
}

// Never throws: availability is an answer, not an error.
void loadDriver(DriverState& s) {
  std::string reason;
  // The loader's search only: toolkit and pip directories hold libcuda *stubs*, which
  // load but fail every call. The real driver is installed system-wide.
  void* handle = openFirstLibrary({"libcuda.so.1", "libcuda.so"}, &reason);
  if (handle == nullptr) {
    if (!reason.empty() && reason.back() == '\n') reason.pop_back();
    s.failure = "the CUDA driver (libcuda) could not be loaded: " + reason;
    return;
  }
  auto* api = new DriverApi();  // leaked with the library: used until process exit
  if (!resolveDriver(handle, *api, &reason)) {
    delete api;
    s.failure = "the CUDA driver is unusable: " + reason;
    return;
  }
  s.resolved = api;  // error texts work before cuInit, so its failure can be described
  if (const CUresult r = api->init(0); r != kCudaSuccess) {
    s.failure = "cuInit(0) failed with " + cuErrorText(r) + " (driver " + api->path + ")";
    return;
  }
  api->driverGetVersion(&api->driver_version);
  s.usable = api;
}

const DriverApi* usableDriver() {
  DriverState& s = driverState();
  std::call_once(s.once, loadDriver, std::ref(s));
  return s.usable;
}

}  // namespace

bool driverAvailable(std::string* why) {
  const DriverApi* api = usableDriver();
  if (api == nullptr && why) *why = driverState().failure;
  return api != nullptr;
}

const DriverApi& driver() {
  const DriverApi* api = usableDriver();
  if (api == nullptr) throw std::runtime_error("fuser: " + driverState().failure);
  return *api;
}

std::string cuErrorText(CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  // Not through usableDriver(): loadDriver itself describes cuInit's failure.
  if (const DriverApi* api = driverState().resolved) {
    api->getErrorName(result, &name);
    api->getErrorString(result, &text);
  }
  std::string out = name ? name : "CUDA error " + std::to_string(result);
  if (text) out += std::string(" (") + text + ")";
  return out;
}

void throwCuError(CUresult result, const std::string& doing) {
  throw std::runtime_error("fuser: " + doing + " failed: " + cuErrorText(result));
}

CUdevice cuDevice(int device_index) {
  const DriverApi& api = driver();
  static const int count = [&] {
    int n = 0;
    checkCu(api.deviceGetCount(&n), "counting CUDA devices");
    return n;
  }();
  if (device_index < 0 || device_index >= count) {
    throw std::runtime_error("fuser: CUDA device index " + std::to_string(device_index) +
                             " is out of range (" + std::to_string(count) + " devices)");
  }
  CUdevice device = 0;
  if (const CUresult r = api.deviceGet(&device, device_index); r != kCudaSuccess) {
    throwCuError(r, "getting CUDA device " + std::to_string(device_index));
  }
  return device;
}

DeviceInfo deviceInfo(int device_index) {
  static std::mutex mutex;
  static auto* cache = new std::map<int, DeviceInfo>();  // leaked with the driver state
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache->find(device_index); it != cache->end()) return it->second;

  const DriverApi& api = driver();
  const CUdevice device = cuDevice(device_index);
  auto read = [&](DeviceAttribute attribute, const char* what) {
    int value = 0;
    if (const CUresult r = api.deviceGetAttribute(&value, attribute, device); r != kCudaSuccess) {
      throwCuError(
          r, std::string("reading ") + what + " of CUDA device " + std::to_string(device_index));
    }
    return value;
  };
  DeviceInfo info{};
  info.arch.major = read(DeviceAttribute::kComputeCapabilityMajor, "the compute capability");
  info.arch.minor = read(DeviceAttribute::kComputeCapabilityMinor, "the compute capability");
  info.sm_count = read(DeviceAttribute::kMultiprocessorCount, "the multiprocessor count");
  info.max_threads_per_block = read(DeviceAttribute::kMaxThreadsPerBlock, "threads per block");
  info.max_threads_per_sm =
      read(DeviceAttribute::kMaxThreadsPerMultiprocessor, "threads per multiprocessor");
  info.l2_bytes = read(DeviceAttribute::kL2CacheSize, "the L2 cache size");
  info.max_shared_per_block =
      read(DeviceAttribute::kMaxSharedPerBlockOptin, "the shared memory per block");
  info.max_shared_per_sm =
      read(DeviceAttribute::kMaxSharedPerMultiprocessor, "the shared memory per multiprocessor");
  cache->emplace(device_index, info);
  return info;
}

}  // namespace fuser::cuda
