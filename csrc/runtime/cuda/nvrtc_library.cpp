// Finds libnvrtc, resolves the entry points of NvrtcApi and reads its version and
// supported architectures. A failed load is retried only after a new search directory
// is registered, so the common "no CUDA here" answer costs one search per process.
#include "runtime/cuda/nvrtc_library.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "runtime/cuda/library_search.h"

namespace fuser::cuda {
namespace {

// Newest first: a newer NVRTC knows newer GPUs. Unversioned last (it is usually a
// toolkit's development symlink, whose version we cannot tell from the name).
constexpr const char* kNvrtcNames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
constexpr const char* kToolkitLibDir = "/usr/local/cuda/lib64";

std::vector<std::string> nvrtcCandidates() {
  if (const char* explicit_path = std::getenv("FUSER_NVRTC_PATH");
      explicit_path && *explicit_path) {
    return {explicit_path};
  }
  std::vector<std::string> dirs = librarySearchDirs();
  dirs.push_back(kToolkitLibDir);
  std::vector<std::string> candidates;
  for (const char* name : kNvrtcNames) {
    candidates.push_back(name);
    for (const std::string& dir : dirs) candidates.push_back(dir + "/" + name);
  }
  return candidates;
}

// Resolves every entry point; on success fills version and architectures too.
bool resolveNvrtc(void* handle, NvrtcApi& api, std::string* why) {
  std::string missing;
  auto need = [&](const char* name, auto& slot) {
    if (!resolveSymbol(handle, name, slot)) missing += std::string(" ") + name;
  };
  need("nvrtcCreateProgram", api.createProgram);
  need("nvrtcCompileProgram", api.compileProgram);
  need("nvrtcDestroyProgram", api.destroyProgram);
  need("nvrtcGetProgramLogSize", api.getProgramLogSize);
  need("nvrtcGetProgramLog", api.getProgramLog);
  need("nvrtcGetCUBINSize", api.getCUBINSize);  // NVRTC >= 11.1
  need("nvrtcGetCUBIN", api.getCUBIN);
  need("nvrtcGetPTXSize", api.getPTXSize);
  need("nvrtcGetPTX", api.getPTX);
  need("nvrtcVersion", api.version);
  need("nvrtcGetErrorString", api.getErrorString);
  if (!missing.empty()) {
    *why = "libnvrtc lacks" + missing + " (NVRTC 11.1 or newer is needed)";
    return false;
  }
  api.path = libraryPathOf(reinterpret_cast<const void*>(api.version));
  if (api.version(&api.major, &api.minor) != kNvrtcSuccess) {
    *why = "nvrtcVersion failed for " + api.path;
    return false;
  }
  nvrtcResult (*get_num_archs)(int*) = nullptr;
  nvrtcResult (*get_archs)(int*) = nullptr;
  int num_archs = 0;
  if (resolveSymbol(handle, "nvrtcGetNumSupportedArchs", get_num_archs) &&
      resolveSymbol(handle, "nvrtcGetSupportedArchs", get_archs) &&
      get_num_archs(&num_archs) == kNvrtcSuccess && num_archs > 0) {
    api.supported_archs.resize(num_archs);
    if (get_archs(api.supported_archs.data()) != kNvrtcSuccess) api.supported_archs.clear();
    std::sort(api.supported_archs.begin(), api.supported_archs.end());
  }
  return true;
}

// NVRTC dlopens libnvrtc-builtins.so.MAJOR.MINOR by bare name at its first compile, so
// the loader finds it only on its own search path: not next to a libnvrtc that we opened
// by full path (the pip package's nvidia/cu13/lib). Loading it first, from libnvrtc's
// directory, satisfies that later lookup: the loader matches the name against the
// SONAME of what is already loaded.
bool loadBuiltins(const NvrtcApi& api, std::string* why) {
  const std::string name =
      "libnvrtc-builtins.so." + std::to_string(api.major) + "." + std::to_string(api.minor);
  const std::string dir = api.path.substr(0, api.path.find_last_of('/') + 1);
  if (openFirstLibrary({dir + name, name}, why) != nullptr) return true;
  *why = name + " (NVRTC's builtins) could not be loaded; " + *why;
  return false;
}

struct NvrtcState {
  std::mutex mutex;
  std::atomic<const NvrtcApi*> api{nullptr};
  bool tried = false;
  uint64_t tried_generation = 0;  // librarySearchGeneration() at the failed attempt
  std::string failure;
};

NvrtcState& nvrtcState() {
  static auto* s = new NvrtcState();  // leaked: kernels may compile during static destruction
  return *s;
}

// The loaded table, or null with the reason in `why`.
const NvrtcApi* tryLoadNvrtc(std::string* why) {
  NvrtcState& s = nvrtcState();
  if (const NvrtcApi* api = s.api.load(std::memory_order_acquire)) return api;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (const NvrtcApi* api = s.api.load(std::memory_order_relaxed)) return api;
  const uint64_t generation = librarySearchGeneration();
  if (!s.tried || generation != s.tried_generation) {
    s.tried = true;
    s.tried_generation = generation;
    std::string reason;
    if (void* handle = openFirstLibrary(nvrtcCandidates(), &reason)) {
      auto api = std::make_unique<NvrtcApi>();
      if (resolveNvrtc(handle, *api, &reason) && loadBuiltins(*api, &reason)) {
        s.api.store(api.release(), std::memory_order_release);  // leaked with the library
        return s.api.load(std::memory_order_relaxed);
      }
    }
    if (!reason.empty() && reason.back() == '\n') reason.pop_back();
    s.failure = "NVRTC could not be loaded: " + reason +
                "\nInstall the pip package nvidia-cuda-nvrtc or set FUSER_NVRTC_PATH to libnvrtc.";
  }
  if (why) *why = s.failure;
  return nullptr;
}

}  // namespace

bool nvrtcAvailable(std::string* why) { return tryLoadNvrtc(why) != nullptr; }

const NvrtcApi& nvrtc() {
  std::string why;
  const NvrtcApi* api = tryLoadNvrtc(&why);
  if (api == nullptr) throw std::runtime_error("fuser: " + why);
  return *api;
}

std::string nvrtcIdentity() {
  const NvrtcApi& api = nvrtc();
  return "nvrtc-" + std::to_string(api.major) + "." + std::to_string(api.minor);
}

}  // namespace fuser::cuda
