// Holds the registered library directories and the dlopen loop over candidates.
// Afterwards: a returned handle is open for the rest of the process.
#include "runtime/cuda/library_search.h"

#include <dlfcn.h>

#include <algorithm>
#include <mutex>

namespace fuser::cuda {
namespace {

struct SearchDirs {
  std::mutex mutex;
  std::vector<std::string> dirs;
  uint64_t generation = 0;
};

SearchDirs& searchDirs() {
  static auto* dirs = new SearchDirs();  // leaked: read by loaders during static destruction
  return *dirs;
}

}  // namespace

void addLibrarySearchDir(const std::string& dir) {
  if (dir.empty()) return;
  SearchDirs& s = searchDirs();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (std::find(s.dirs.begin(), s.dirs.end(), dir) != s.dirs.end()) return;
  s.dirs.push_back(dir);
  s.generation++;
}

std::vector<std::string> librarySearchDirs() {
  SearchDirs& s = searchDirs();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.dirs;
}

uint64_t librarySearchGeneration() {
  SearchDirs& s = searchDirs();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.generation;
}

void* openFirstLibrary(const std::vector<std::string>& candidates, std::string* why) {
  std::string attempts;
  for (const std::string& candidate : candidates) {
    if (void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    const char* err = dlerror();
    attempts += "  " + candidate + ": " + (err ? err : "not found") + "\n";
  }
  if (why) *why = "tried:\n" + attempts;
  return nullptr;
}

void* lookupSymbol(void* handle, const char* name) { return dlsym(handle, name); }

std::string libraryPathOf(const void* symbol) {
  Dl_info info{};
  if (dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

}  // namespace fuser::cuda
