// NVRTC, loaded at run time with dlopen so that the extension builds and imports on
// machines without CUDA. We declare the few NVRTC types and entry points we call
// ourselves instead of including nvrtc.h (no CUDA headers at build time).
// After nvrtcAvailable() returns true, nvrtc() gives a fully resolved table that stays
// valid for the rest of the process.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace fuser::cuda {

// ABI-compatible stand-ins for nvrtc.h's declarations.
using nvrtcResult = int;  // an enum in nvrtc.h; NVRTC_SUCCESS is 0
using nvrtcProgram = void*;
constexpr nvrtcResult kNvrtcSuccess = 0;

struct NvrtcApi {
  nvrtcResult (*createProgram)(nvrtcProgram* prog, const char* src, const char* name,
                               int num_headers, const char* const* headers,
                               const char* const* include_names);
  nvrtcResult (*compileProgram)(nvrtcProgram prog, int num_options, const char* const* options);
  nvrtcResult (*destroyProgram)(nvrtcProgram* prog);
  nvrtcResult (*getProgramLogSize)(nvrtcProgram prog, size_t* size);
  nvrtcResult (*getProgramLog)(nvrtcProgram prog, char* log);
  nvrtcResult (*getCUBINSize)(nvrtcProgram prog, size_t* size);
  nvrtcResult (*getCUBIN)(nvrtcProgram prog, char* cubin);
  nvrtcResult (*getPTXSize)(nvrtcProgram prog, size_t* size);
  nvrtcResult (*getPTX)(nvrtcProgram prog, char* ptx);
  nvrtcResult (*version)(int* major, int* minor);
  const char* (*getErrorString)(nvrtcResult result);

  int major = 0;
  int minor = 0;
  // Architectures NVRTC can emit SASS for, as archCode() values in ascending order.
  // Empty when the library cannot list them (nvrtcGetSupportedArchs is from NVRTC 11.2).
  std::vector<int> supported_archs;
  std::string path;  // the file that was loaded, for diagnostics
};

// Whether NVRTC can be loaded; `why` gets every path tried and why each failed when not.
// Search order: $FUSER_NVRTC_PATH alone when set (a full path; an explicit choice is
// never silently replaced by another library); otherwise, newest major first, each of
// libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so through the loader's own search, then in
// every addLibrarySearchDir directory, then in /usr/local/cuda/lib64.
bool nvrtcAvailable(std::string* why = nullptr);

// The loaded table. Throws std::runtime_error saying why when NVRTC cannot be loaded.
const NvrtcApi& nvrtc();

// "nvrtc-MAJOR.MINOR" of the loaded library; part of disk-cache keys. Throws like nvrtc().
std::string nvrtcIdentity();

}  // namespace fuser::cuda
