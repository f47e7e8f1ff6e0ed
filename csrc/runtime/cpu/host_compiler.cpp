#include "runtime/cpu/host_compiler.h"

#include "codegen/expr_analysis.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "codegen/cpp_printer.h"
#include "config.h"
#include "runtime/disk_cache.h"
#include "runtime/hashing.h"
#include "stats.h"

namespace fuser::runtime {
namespace {

// Chosen for speed; -fwrapv gives integer overflow eager's wrap-around, and no
// -ffast-math, which would change NaN and rounding behaviour. -fno-trapping-math only
// gives up floating-point exception flags (nobody reads them), and without it GCC will
// not turn the selects of a NaN-aware clamp into blends, so no loop would vectorize.
// -fopenmp-simd honours `#pragma omp simd` (row kernels' reductions) without linking
// OpenMP's runtime. Contraction stays on: a multiply and the next op's add may become
// one FMA (an ulp from eager's two roundings), but -ffp-contract=off slowed the erf
// polynomial of gelu(x + bias) by 15% here, and eager's own math functions use FMAs.
constexpr const char* kFlags = "-O3 -march=native -std=c++17 -fPIC -shared -fwrapv "
                               "-fno-math-errno -fno-trapping-math -fno-plt -fopenmp-simd";

// cpuGrainSize's scale: a kernel costing kCheapCost per element gets kCheapGrain.
constexpr int64_t kCheapGrain = 32768;
constexpr int64_t kCheapCost = 8;
constexpr int64_t kMinGrain = 1024;

std::string compilerCommand() {
  const char* cxx = std::getenv("CXX");
  return (cxx && *cxx) ? cxx : "c++";
}

std::string runAndCapture(const std::string& cmd, int* status) {
  std::string out;
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (!pipe) {
    *status = -1;
    return "could not start: " + cmd;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  *status = pclose(pipe);
  return out;
}

// Compiler version and host CPU flags: part of every disk-cache key, so that a
// kernel built for another compiler or instruction set is never loaded.
const std::string& toolchainIdentity() {
  static const std::string identity = [] {
    int status = 0;
    std::string version = runAndCapture(compilerCommand() + " --version", &status);
    version = version.substr(0, version.find('\n'));
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line, flags;
    while (std::getline(cpuinfo, line)) {
      if (line.rfind("flags", 0) == 0) {
        flags = line;
        break;
      }
    }
    return version + "|" + kFlags + "|" + hex64(fnv1a(flags));
  }();
  return identity;
}

// dlopen wants a file: the image goes to an anonymous in-memory file. The descriptor
// stays open for the life of the process: dlopen identifies libraries by path, so a
// reused "/proc/self/fd/N" would hand back an earlier kernel.
void* loadSharedObject(const std::string& image) {
  int fd = memfd_create("fuser-kernel", MFD_CLOEXEC);
  TORCH_CHECK(fd >= 0, "fuser: memfd_create failed");
  size_t written = 0;
  while (written < image.size()) {
    ssize_t n = write(fd, image.data() + written, image.size() - written);
    if (n <= 0) {
      close(fd);
      TORCH_CHECK(false, "fuser: could not write kernel image");
    }
    written += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) close(fd);
  TORCH_CHECK(handle, "fuser: dlopen of a generated kernel failed: ", dlerror());
  return handle;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string compileToImage(const std::string& source) {
  char dir_template[] = "/tmp/fuser-build-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  TORCH_CHECK(dir, "fuser: could not create a temporary build directory");
  const std::string src = std::string(dir) + "/kernel.cpp";
  const std::string lib = std::string(dir) + "/kernel.so";
  {
    std::ofstream out(src);
    out << source;
  }
  int status = 0;
  const std::string cmd = hostCompileCommand() + " -o " + lib + " " + src;
  const std::string log = runAndCapture(cmd, &status);
  std::string image = status == 0 ? readFile(lib) : std::string();
  std::remove(src.c_str());
  std::remove(lib.c_str());
  rmdir(dir);
  TORCH_CHECK(status == 0 && !image.empty(), "fuser: the host compiler failed (", cmd, "):\n",
              log);
  return image;
}

class CpuKernel final : public CompiledKernel {
 public:
  CpuKernel(void* handle, codegen::CpuKernelFn fn, int64_t grain)
      : handle_(handle), fn_(fn), grain_(grain) {}
  // The handle is never closed: a kernel may be in use from another thread until exit.

  void launch(const LaunchArgs& a) const override {
    int32_t error = 0;
    const int64_t grain = a.grain > 0 ? a.grain : grain_;
    if (a.numel <= grain || at::get_num_threads() == 1) {
      fn_(a.ptrs, a.sizes, a.strides, a.dargs, a.iargs, &error, 0, a.numel);
    } else {
      std::atomic<int32_t> any_error{0};
      const int64_t align = std::max<int64_t>(a.align, 1);
      const int64_t units = (a.numel + align - 1) / align;
      at::parallel_for(0, units, (grain + align - 1) / align, [&](int64_t begin, int64_t end) {
        int32_t local = 0;
        fn_(a.ptrs, a.sizes, a.strides, a.dargs, a.iargs, &local, begin * align,
            std::min(end * align, a.numel));
        if (local) any_error = 1;
      });
      error = any_error.load();
    }
    TORCH_CHECK(error == 0, "ZeroDivisionError");
  }

 private:
  void* handle_;
  codegen::CpuKernelFn fn_;
  int64_t grain_;
};

struct KernelRegistry {
  std::mutex mutex;
  std::unordered_map<uint64_t, std::shared_ptr<CompiledKernel>> by_source;
};

KernelRegistry& cpuKernelRegistry() {
  static auto* r = new KernelRegistry();  // leaked: kernels outlive static destruction
  return *r;
}

}  // namespace

std::string hostCompileCommand() { return compilerCommand() + " " + kFlags; }

int64_t cpuGrainSize(const codegen::Kernel& kernel) {
  const int64_t cost = std::max(1, codegen::elementCost(kernel));
  return std::clamp(kCheapGrain * kCheapCost / cost, kMinGrain, kCheapGrain);
}

std::shared_ptr<CompiledKernel> compileCpuKernel(const std::string& source,
                                                 const std::string& name, int64_t grain) {
  const uint64_t source_hash = fnv1a(source);
  KernelRegistry& r = cpuKernelRegistry();
  // One lock for lookup and compile: concurrent first calls wait and then share.
  std::lock_guard<std::mutex> lock(r.mutex);
  if (auto it = r.by_source.find(source_hash); it != r.by_source.end()) {
    stats().memory_cache_hits++;
    return it->second;
  }

  static const DiskCache disk("cpu");
  const std::string key = toolchainIdentity() + "\n" + source;
  std::string image;
  if (auto cached = disk.load(key)) {
    image = std::move(*cached);
    stats().disk_cache_hits++;
  } else {
    image = compileToImage(source);
    stats().kernels_compiled++;
    disk.store(key, image);
  }
  recordKernelSource(source);
  if (config().dump_kernels) std::cerr << "[fuser] CPU kernel:\n" << source << std::endl;

  void* handle = loadSharedObject(image);
  auto fn = reinterpret_cast<codegen::CpuKernelFn>(dlsym(handle, name.c_str()));
  TORCH_CHECK(fn, "fuser: generated kernel has no symbol ", name);
  auto kernel = std::make_shared<CpuKernel>(handle, fn, grain);
  r.by_source.emplace(source_hash, kernel);
  return kernel;
}

}  // namespace fuser::runtime
