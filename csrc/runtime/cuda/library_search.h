// Finding and dlopen-ing the CUDA shared libraries we load at run time. C++ has no
// sys.path, so the Python layer registers the pip package directories it can see
// (site-packages/nvidia/cu13/lib, torch/lib, ...) with addLibrarySearchDir.
// After openFirstLibrary returns a handle it is never closed: function pointers into it
// stay valid until the process exits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fuser::cuda {

// Adds a directory to search for CUDA libraries (duplicates are ignored). Thread-safe.
// A library that failed to load is searched for again after a directory is added.
void addLibrarySearchDir(const std::string& dir);

// The registered directories, in the order they were added.
std::vector<std::string> librarySearchDirs();

// Counts addLibrarySearchDir calls that added a directory, so a failed load can tell
// whether trying again could find something new.
uint64_t librarySearchGeneration();

// dlopens the first candidate that loads (RTLD_NOW | RTLD_LOCAL): a bare file name goes
// through the dynamic loader's own search, a path is opened as is. Returns null when
// none loads, with one line per attempt and dlerror()'s text in `why`.
void* openFirstLibrary(const std::vector<std::string>& candidates, std::string* why);

// dlsym without the <dlfcn.h> include in every user: null when `name` is missing.
void* lookupSymbol(void* handle, const char* name);

// The file a loaded library was opened from, found through one of its symbols.
std::string libraryPathOf(const void* symbol);

// Points `slot` at `handle`'s symbol `name`; false (slot null) when it is missing.
template <typename Fn>
bool resolveSymbol(void* handle, const char* name, Fn*& slot) {
  slot = reinterpret_cast<Fn*>(lookupSymbol(handle, name));
  return slot != nullptr;
}

}  // namespace fuser::cuda
