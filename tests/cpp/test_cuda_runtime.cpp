// Tests csrc/runtime/cuda/: NVRTC loading and compilation, which run on any machine with
// the nvidia-cuda-nvrtc pip package (no GPU needed), and the driver layer, which checks
// for a clear "no driver" answer without a GPU and launches a kernel with one.
// NVRTC is found through FUSER_NVRTC_PATH (a full path to libnvrtc), FUSER_TEST_NVRTC_DIR
// (a directory), or else the pip package directories on python3's sys.path, as the Python
// package does at import.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "runtime/batch_norm_statistics.h"
#include "runtime/cuda/cuda_kernel.h"
#include "runtime/cuda/driver_library.h"
#include "runtime/max_pool_op.h"
#include "runtime/relayout_op.h"
#include "runtime/cuda/library_search.h"
#include "runtime/column_partials.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "runtime/cuda/primary_context.h"

namespace fuser::cuda {
namespace {

// The lines `command` prints, or none if it cannot run.
std::vector<std::string> outputLines(const std::string& command) {
  std::vector<std::string> lines;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return lines;
  char buffer[4096];
  while (std::fgets(buffer, sizeof(buffer), pipe)) {
    std::string line(buffer);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (!line.empty()) lines.push_back(line);
  }
  pclose(pipe);
  return lines;
}

// Registers the directories where NVRTC may be, once, before any test asks for it.
class NvrtcSearchDirs : public ::testing::Environment {
 public:
  void SetUp() override {
    if (const char* dir = std::getenv("FUSER_TEST_NVRTC_DIR"); dir && *dir) {
      addLibrarySearchDir(dir);
      return;
    }
    const char* python = std::getenv("PYTHON");
    const std::string command = std::string(python && *python ? python : "python3") +
                                " -c 'import sys; print(\"\\n\".join(sys.path))' 2>/dev/null";
    for (const std::string& entry : outputLines(command)) {
      for (const char* sub : {"/nvidia/cu13/lib", "/nvidia/cuda_nvrtc/lib", "/nvidia/cu12/lib"}) {
        addLibrarySearchDir(entry + sub);
      }
    }
  }
};

const auto* const kSearchDirs = ::testing::AddGlobalTestEnvironment(new NvrtcSearchDirs());

#define SKIP_WITHOUT_NVRTC()                                        \
  do {                                                              \
    std::string why;                                                \
    if (!nvrtcAvailable(&why)) GTEST_SKIP() << "no NVRTC: " << why; \
  } while (0)

// Writes y[i] = a * i + 1 for i < n: output only, so a test needs no host-to-device copy.
constexpr const char* kAffineKernel = R"(
extern "C" __global__ void affine(float* y, float a, unsigned long long n) {
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * (float)i + 1.0f;
}
)";

TEST(Nvrtc, IdentityNamesMajorAndMinor) {
  SKIP_WITHOUT_NVRTC();
  const std::string id = nvrtcIdentity();
  EXPECT_EQ(id.rfind("nvrtc-", 0), 0u) << id;
  EXPECT_NE(id.find('.'), std::string::npos) << id;
  EXPECT_FALSE(nvrtc().path.empty());
}

TEST(Nvrtc, CompilesSmallKernelToSm90Cubin) {
  SKIP_WITHOUT_NVRTC();
  std::string log = "unset";
  const std::string image = compileToCubin(kAffineKernel, Arch{9, 0}, &log);
  ASSERT_GT(image.size(), 4u);
  EXPECT_TRUE(isCubin(image)) << "a cubin is an ELF image";
  EXPECT_NE(log, "unset");
}

// The kernel combining batch_norm's per-sample rows (runtime/batch_norm_statistics.h),
// which no generated kernel covers: it compiles for every pair of statistics' and running
// statistics' dtypes it takes, and refuses the others.
TEST(Nvrtc, BatchNormCombineKernelCompiles) {
  SKIP_WITHOUT_NVRTC();
  using c10::ScalarType;
  const std::pair<ScalarType, ScalarType> pairs[] = {
      {ScalarType::Float, ScalarType::Float},
      {ScalarType::Double, ScalarType::Double},
      {ScalarType::Float, ScalarType::Half},
      {ScalarType::Float, ScalarType::BFloat16}};
  for (const auto& [dtype, running] : pairs) {
    const std::string image =
        compileToCubin(runtime::batchNormCombineSource(dtype, running), Arch{9, 0});
    EXPECT_TRUE(isCubin(image)) << dtype << " " << running;
    EXPECT_NE(image.find(runtime::kBatchNormCombineKernel), std::string::npos) << dtype;
  }
  EXPECT_THROW(runtime::batchNormCombineSource(ScalarType::Half), c10::Error);
  EXPECT_THROW(runtime::batchNormCombineSource(ScalarType::Double, ScalarType::Half),
               c10::Error);
  EXPECT_THROW(runtime::batchNormCombineSource(ScalarType::Float, ScalarType::Double),
               c10::Error);
}

// The kernel that adds up a row kernel's column partials (runtime/column_partials.h),
// for each output dtype it stores.
TEST(Nvrtc, ColumnPartialsKernelCompilesForEachDtype) {
  SKIP_WITHOUT_NVRTC();
  for (auto dtype : {c10::kFloat, c10::kHalf, c10::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    const std::string image = compileToCubin(runtime::columnPartialsSource(dtype), Arch{9, 0});
    EXPECT_TRUE(isCubin(image));
    EXPECT_NE(image.find(runtime::kColumnPartialsKernel), std::string::npos);
  }
}

// The channels-last max pool (runtime/max_pool_op.h): every dtype and vector width the
// operator launches compiles.
TEST(Nvrtc, MaxPoolKernelCompilesForEachDtypeAndVector) {
  SKIP_WITHOUT_NVRTC();
  const std::pair<c10::ScalarType, int> kinds[] = {
      {c10::ScalarType::Float, 1}, {c10::ScalarType::Float, 4}, {c10::ScalarType::Half, 1},
      {c10::ScalarType::Half, 8},  {c10::ScalarType::BFloat16, 1}, {c10::ScalarType::BFloat16, 8}};
  for (const auto& [dtype, vector] : kinds) {
    const std::string image =
        compileToCubin(runtime::maxPoolChannelsLastSource(dtype, vector), Arch{9, 0});
    EXPECT_TRUE(isCubin(image)) << dtype << " x" << vector;
    EXPECT_NE(image.find(runtime::kMaxPoolChannelsLastKernel), std::string::npos) << dtype;
  }
  EXPECT_THROW(runtime::maxPoolChannelsLastSource(c10::ScalarType::Double, 1), c10::Error);
  EXPECT_THROW(runtime::maxPoolChannelsLastSource(c10::ScalarType::Float, 8), c10::Error);
}

// The relayout gather (runtime/relayout_op.h): every unit width and index width compiles.
TEST(Nvrtc, GatherRowsKernelCompilesForEachUnitAndIndexWidth) {
  SKIP_WITHOUT_NVRTC();
  for (int unit : {1, 2, 4, 8, 16}) {
    for (bool wide : {false, true}) {
      const std::string image = compileToCubin(runtime::gatherRowsSource(unit, wide), Arch{9, 0});
      EXPECT_TRUE(isCubin(image)) << unit << " bytes, wide " << wide;
      EXPECT_NE(image.find(runtime::kGatherRowsKernel), std::string::npos) << unit;
    }
  }
  EXPECT_THROW(runtime::gatherRowsSource(3, false), c10::Error);
}

TEST(Nvrtc, SyntaxErrorThrowsWithLogAndSourceLine) {
  SKIP_WITHOUT_NVRTC();
  const std::string source =
      "extern \"C\" __global__ void broken(float* y) {\n"
      "  float x = 1.0f\n"  // line 2: missing ';'
      "  y[0] = x;\n"
      "}\n";
  try {
    compileToCubin(source, Arch{9, 0});
    FAIL() << "expected a compile error";
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("NVRTC_ERROR_COMPILATION"), std::string::npos) << message;
    EXPECT_NE(message.find("error"), std::string::npos) << message;  // NVRTC's log
    EXPECT_NE(message.find("fuser_kernel.cu("), std::string::npos) << message;
    EXPECT_NE(message.find("y[0] = x;"), std::string::npos) << "quotes the named line:\n"
                                                            << message;
  }
}

TEST(Nvrtc, ArchNewerThanNvrtcGetsPtxForTheNewestItKnows) {
  SKIP_WITHOUT_NVRTC();
  if (nvrtc().supported_archs.empty()) GTEST_SKIP() << "this NVRTC cannot list its archs";
  const std::string newest = std::to_string(nvrtc().supported_archs.back());
  const std::string image = compileToCubin(kAffineKernel, Arch{99, 0});
  EXPECT_FALSE(isCubin(image));
  EXPECT_NE(image.find(".target sm_" + newest), std::string::npos) << image.substr(0, 400);
  EXPECT_NE(image.find(".entry affine"), std::string::npos);
}

TEST(Nvrtc, ArchOlderThanNvrtcThrows) {
  SKIP_WITHOUT_NVRTC();
  if (nvrtc().supported_archs.empty()) GTEST_SKIP() << "this NVRTC cannot list its archs";
  try {
    compileToCubin(kAffineKernel, Arch{2, 0});
    FAIL() << "sm_20 should be refused";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("sm_20 is older"), std::string::npos) << e.what();
  }
}

TEST(Nvrtc, CompilesFromSeveralThreadsAtOnce) {
  SKIP_WITHOUT_NVRTC();
  std::vector<std::string> images(4);
  std::vector<std::thread> threads;
  for (std::string& image : images) {
    threads.emplace_back([&image] {
      try {
        image = compileToCubin(kAffineKernel, Arch{8, 0});
      } catch (const std::exception& e) {
        image = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& image : images) EXPECT_TRUE(isCubin(image)) << image.substr(0, 400);
}

TEST(Driver, DeviceInfoOrClearError) {
  std::string why;
  if (!driverAvailable(&why)) {
    EXPECT_FALSE(why.empty());
    try {
      deviceInfo(0);
      FAIL() << "deviceInfo must throw without a driver";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
    return;
  }
  const DeviceInfo info = deviceInfo(0);
  EXPECT_GT(info.sm_count, 0);
  EXPECT_GE(info.arch.major, 3);
  EXPECT_GE(info.max_threads_per_block, 256);
  EXPECT_GE(info.max_threads_per_sm, info.max_threads_per_block);
  EXPECT_GT(info.l2_bytes, 0);
  EXPECT_THROW(deviceInfo(1 << 20), std::runtime_error);
}

// Compiles, loads, launches and reads back, on a fresh thread whose current context is
// none: the layer must make the primary context current and then restore "none".
TEST(Driver, LaunchWritesMemoryAndRestoresContext) {
  std::string why;
  if (!driverAvailable(&why)) GTEST_SKIP() << "no CUDA driver: " << why;
  SKIP_WITHOUT_NVRTC();
  std::thread([] {
    const DriverApi& api = driver();
    CUcontext before = reinterpret_cast<CUcontext>(1);
    checkCu(api.ctxGetCurrent(&before), "cuCtxGetCurrent");
    ASSERT_EQ(before, nullptr);

    const LoadedKernel kernel(0, compileToCubin(kAffineKernel, deviceInfo(0).arch), "affine");
    EXPECT_EQ(kernel.device(), 0);
    constexpr unsigned long long n = 1000;
    CUdeviceptr y = 0;
    {
      PrimaryContextGuard context(0);
      checkCu(api.memAlloc(&y, n * sizeof(float)), "cuMemAlloc");
    }
    float a = 0.5f;
    unsigned long long count = n;
    void* params[] = {&y, &a, &count};
    kernel.launch((n + 255) / 256, 1, 256, params, /*stream=*/nullptr);
    std::vector<float> host(n);
    {
      PrimaryContextGuard context(0);
      checkCu(api.ctxSynchronize(), "cuCtxSynchronize");
      checkCu(api.memcpyDtoH(host.data(), y, n * sizeof(float)), "cuMemcpyDtoH");
      checkCu(api.memFree(y), "cuMemFree");
    }
    for (unsigned long long i = 0; i < n; ++i) ASSERT_EQ(host[i], 0.5f * i + 1.0f) << i;

    CUcontext after = reinterpret_cast<CUcontext>(1);
    checkCu(api.ctxGetCurrent(&after), "cuCtxGetCurrent");
    EXPECT_EQ(after, nullptr) << "the thread's context was not restored";
  }).join();
}

TEST(Driver, MissingKernelNameThrows) {
  std::string why;
  if (!driverAvailable(&why)) GTEST_SKIP() << "no CUDA driver: " << why;
  SKIP_WITHOUT_NVRTC();
  const std::string image = compileToCubin(kAffineKernel, deviceInfo(0).arch);
  try {
    LoadedKernel kernel(0, image, "no_such_kernel");
    FAIL() << "expected a lookup failure";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_kernel"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fuser::cuda
