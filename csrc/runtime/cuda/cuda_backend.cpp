#include "runtime/cuda/cuda_backend.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>

#include "codegen/cuda_printer.h"
#include "codegen/row_printer.h"
#include "passes/param_space.h"
#include "config.h"
#include "runtime/cuda/cuda_kernel.h"
#include "runtime/cuda/driver_library.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "runtime/disk_cache.h"
#include "runtime/hashing.h"
#include "stats.h"

namespace fuser::runtime {
namespace {

// PyTorch's current stream on `device`, through c10's device-guard interface, so that
// we need no link against c10_cuda.
void* currentStream(c10::Device device) {
  const c10::impl::DeviceGuardImplInterface* impl =
      c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  return impl->getStream(device).native_handle();
}

class CudaKernel final : public CompiledKernel {
 public:
  CudaKernel(codegen::Kernel ir, std::unique_ptr<cuda::LoadedKernel> loaded, int sm_count)
      : ir_(std::move(ir)),
        vectors_(codegen::cudaVectorShape(ir_)),
        args_(ir_),
        loaded_(std::move(loaded)),
        sm_count_(sm_count) {
    if (!ir_.fixed.empty()) {
      fixed_launch_ = codegen::cudaLaunchShape(ir_, vectors_, ir_.fixed.sizes.data(),
                                               ir_.fixed.numel, sm_count_);
    }
  }

  void launch(const LaunchArgs& a) const override {
    const codegen::CudaLaunchShape shape =
        fixed_launch_ ? *fixed_launch_
                      : codegen::cudaLaunchShape(ir_, vectors_, a.sizes, a.numel, sm_count_);
    codegen::CudaArgSlots slots =
        args_.pack(a.ptrs, a.sizes, a.strides, a.dargs, a.iargs, a.numel, shape.vectors);
    void* params[] = {slots.data()};
    loaded_->launch(static_cast<unsigned>(shape.grid_x), static_cast<unsigned>(shape.grid_y),
                    shape.block, params, currentStream(a.device));
  }

 private:
  codegen::Kernel ir_;  // the launch shape depends on it
  codegen::CudaVectorShape vectors_;
  codegen::CudaArgLayout args_;
  std::unique_ptr<cuda::LoadedKernel> loaded_;
  int sm_count_;
  std::optional<codegen::CudaLaunchShape> fixed_launch_;  // kernels compiled for one shape
};

// A row kernel (codegen/row_printer.h): one struct of 8-byte words for its arguments,
// rows spread over blocks of cudaRowBlock threads.
class CudaRowKernel final : public CompiledKernel {
 public:
  CudaRowKernel(const codegen::Kernel& ir, std::unique_ptr<cuda::LoadedKernel> loaded)
      : loaded_(std::move(loaded)),
        block_(codegen::cudaRowBlock(ir)),
        rows_per_block_(codegen::cudaRowBlock(ir) / ir.row_lanes),
        words_(codegen::cudaRowArgWords(ir)),
        num_doubles_(0),
        num_ints_(codegen::rowIntArgs(ir)),  // a stage's slice count included
        strided_outputs_(ir.strided_outputs ? static_cast<int>(ir.outputs.size()) : 0),
        column_partials_(codegen::hasColumnPartials(ir)),
        columns_(ir.columns) {
    if (ir.columns_in_shared) {
      in_shared_ = ir.inputs;
      in_shared_vector_ = ir.row_vector;
      outer_ndim_ = ir.outer_ndim;
    }
    if (column_partials_) {
      resident_blocks_ = loaded_->residentBlocksPerSm(block_) *
                         cuda::deviceInfo(loaded_->device()).sm_count;
    }
    for (codegen::ScalarArgKind kind : ir.scalars) {
      num_doubles_ += kind == codegen::ScalarArgKind::Double;
    }
  }

  // As many blocks as are resident at once on the whole device (a second wave would
  // walk its rows after the first's), fewer where the rows do not need them.
  int64_t columnPartialRows(int64_t rows) const override {
    if (!column_partials_) return 0;
    return codegen::cudaColumnPartialBlocks(rows_per_block_, rows, resident_blocks_);
  }

  void launch(const LaunchArgs& a) const override {
    // At most kCudaParamBytes (compileCudaRowKernel checks).
    uint64_t words[kCudaParamBytes / sizeof(uint64_t)] = {};
    int64_t used = 0;
    auto put = [&](const void* data, int64_t count) {
      if (count > 0) std::memcpy(words + used, data, count * sizeof(uint64_t));
      used += std::max<int64_t>(count, 1);  // each array takes a word at least
    };
    put(a.ptrs, a.num_inputs + a.num_outputs);
    put(a.sizes, a.ndim);
    // (A stage's num_outputs counts its workspace buffers too, which have no strides.)
    put(a.strides, int64_t{a.num_inputs + strided_outputs_} * a.ndim);
    put(a.dargs, num_doubles_);
    put(a.iargs, num_ints_);
    words[used++] = static_cast<uint64_t>(a.numel);
    TORCH_INTERNAL_ASSERT(used == words_);
    void* params[] = {words};
    // Column partials: a block per row of partials, the runtime's buffer's count.
    const int64_t grid = column_partials_ ? columnPartialRows(a.numel)
                                          : (a.numel + rows_per_block_ - 1) / rows_per_block_;
    // A column kernel's warps share each block's rows: it has no thread past its units.
    // (Column partials are a kernel over trailing dims, never a column kernel.)
    TORCH_CHECK(!columns_ || a.numel % block_ == 0,
                "fuser: a column kernel launches whole blocks (", a.numel, " threads)");
    TORCH_CHECK(grid < (int64_t{1} << 31), "fuser: too many rows for one launch");
    // Columns in shared memory: their copies of each row's elements (the runtime offers
    // the variant only where they fit).
    int shared = 0;
    if (!in_shared_.empty()) {
      int64_t n = 1;
      for (int d = outer_ndim_; d < a.ndim; ++d) n *= a.sizes[d];
      const int64_t bytes = codegen::cudaColumnSharedBytes(in_shared_, in_shared_vector_, n);
      TORCH_CHECK(bytes <= codegen::kCudaColumnSharedBytes,
                  "fuser: a column kernel's rows do not fit in shared memory");
      shared = static_cast<int>(bytes);
      loaded_->allowSharedBytes(shared);
      stats().column_in_shared_launches++;
    }
    loaded_->launch(static_cast<unsigned>(grid), 1, static_cast<unsigned>(block_), params,
                    currentStream(a.device), static_cast<unsigned>(shared));
  }

 private:
  std::unique_ptr<cuda::LoadedKernel> loaded_;
  int block_;
  int rows_per_block_;
  int64_t words_;
  int num_doubles_;
  int num_ints_;
  int strided_outputs_;  // outputs the launch strides cover (Kernel::strided_outputs)
  bool column_partials_;  // TensorOutput::column_partial
  bool columns_;          // Kernel::columns
  int resident_blocks_ = 1;  // on the device at once (column partials)
  // Kernel::columns_in_shared: the inputs, rows a thread and outer dims that size the
  // launch's dynamic shared memory (no inputs: none).
  std::vector<codegen::TensorInput> in_shared_;
  int in_shared_vector_ = 1;
  int outer_ndim_ = 1;
};

// A kernel written as source (not printed from kernel IR): launched with its own grid,
// block and arguments through launchCudaSource.
class CudaSourceKernel final : public CompiledKernel {
 public:
  explicit CudaSourceKernel(std::unique_ptr<cuda::LoadedKernel> loaded)
      : loaded_(std::move(loaded)) {}
  void launch(const LaunchArgs&) const override {
    TORCH_CHECK(false, "fuser: a source kernel takes its own arguments (launchCudaSource)");
  }
  void launch(unsigned grid, unsigned grid_y, unsigned block, void** params,
              c10::Device device) const {
    loaded_->launch(grid, grid_y, block, params, currentStream(device));
  }

 private:
  std::unique_ptr<cuda::LoadedKernel> loaded_;
};

struct CudaKernelRegistry {
  std::mutex mutex;
  std::map<std::pair<uint64_t, int>, std::shared_ptr<CompiledKernel>> by_source_and_device;
};

CudaKernelRegistry& cudaKernelRegistry() {
  static auto* r = new CudaKernelRegistry();  // leaked: modules outlive static destruction
  return *r;
}

// The kernel printed as `source`, compiled (or read from the disk cache) for `device`
// and loaded once per process; `wrap` makes the launcher.
std::shared_ptr<CompiledKernel> loadCudaKernel(
    const std::string& source, const std::string& name, c10::Device device,
    const std::function<std::shared_ptr<CompiledKernel>(std::unique_ptr<cuda::LoadedKernel>)>&
        wrap) {
  const int index = device.index() < 0 ? 0 : device.index();
  const cuda::DeviceInfo info = cuda::deviceInfo(index);
  CudaKernelRegistry& r = cudaKernelRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const auto key = std::make_pair(fnv1a(source), index);
  if (auto it = r.by_source_and_device.find(key); it != r.by_source_and_device.end()) {
    stats().memory_cache_hits++;
    return it->second;
  }

  static const DiskCache disk("cuda");
  const std::string disk_key = cuda::nvrtcIdentity() + "|sm_" + std::to_string(info.arch.major) +
                               std::to_string(info.arch.minor) + "\n" + source;
  std::string image;
  if (auto cached = disk.load(disk_key)) {
    image = std::move(*cached);
    stats().disk_cache_hits++;
  } else {
    image = cuda::compileToCubin(source, info.arch);
    stats().kernels_compiled++;
    disk.store(disk_key, image);
  }
  recordKernelSource(source);
  if (config().dump_kernels) std::cerr << "[fuser] CUDA kernel:\n" << source << std::endl;

  auto compiled = wrap(std::make_unique<cuda::LoadedKernel>(index, image, name));
  r.by_source_and_device.emplace(key, compiled);
  return compiled;
}

}  // namespace

std::shared_ptr<CompiledKernel> compileCudaKernel(codegen::Kernel kernel, c10::Device device) {
  const int index = device.index() < 0 ? 0 : device.index();
  const cuda::DeviceInfo info = cuda::deviceInfo(index);
  if (!kernel.fixed.empty()) {
    // Its one shape has one launch shape on this device: the kernel keeps only the path
    // that launch takes.
    const codegen::CudaLaunchShape launch =
        codegen::cudaLaunchShape(kernel, codegen::cudaVectorShape(kernel),
                                 kernel.fixed.sizes.data(), kernel.fixed.numel, info.sm_count);
    kernel.fixed.vectors = launch.vectors;
  }
  const std::string source = codegen::printCudaKernel(kernel);
  return loadCudaKernel(source, kernel.name, device, [&](std::unique_ptr<cuda::LoadedKernel> loaded) {
    return std::make_shared<CudaKernel>(kernel, std::move(loaded), info.sm_count);
  });
}

std::shared_ptr<CompiledKernel> compileCudaRowKernel(const codegen::Kernel& kernel,
                                                     c10::Device device) {
  TORCH_CHECK(codegen::cudaRowArgWords(kernel) * 8 <= kCudaParamBytes,
              "fuser: a row kernel's arguments exceed CUDA's parameter space");
  const std::string source = codegen::printCudaRowKernel(kernel);
  return loadCudaKernel(source, kernel.name, device, [&](std::unique_ptr<cuda::LoadedKernel> loaded) {
    return std::make_shared<CudaRowKernel>(kernel, std::move(loaded));
  });
}

std::shared_ptr<CompiledKernel> loadCudaSource(const std::string& source, const std::string& name,
                                               c10::Device device) {
  return loadCudaKernel(source, name, device, [](auto loaded) {
    return std::make_shared<CudaSourceKernel>(std::move(loaded));
  });
}

void launchCudaSource(const CompiledKernel& kernel, c10::Device device, unsigned grid,
                      unsigned block, void** params, unsigned grid_y) {
  static_cast<const CudaSourceKernel&>(kernel).launch(grid, grid_y, block, params, device);
}

void launchCudaSource(const std::string& source, const std::string& name, c10::Device device,
                      unsigned grid, unsigned block, void** params, unsigned grid_y) {
  launchCudaSource(*loadCudaSource(source, name, device), device, grid, block, params, grid_y);
}

}  // namespace fuser::runtime
