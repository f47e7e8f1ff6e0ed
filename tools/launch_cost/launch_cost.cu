// Host cost of one kernel launch by launch path, on an idle GPU: the runtime's <<<>>>,
// the driver's cuLaunchKernel on the same function, and cuLaunchKernel on a function
// from a module loaded from a cubin image (as the fuser loads its kernels), with one
// packed parameter struct or separate parameters, on the legacy default stream and on
// a stream of its own. Built as a shared library so that it can also run inside a
// process that has imported torch (launch_cost.py).
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern "C" __global__ void tiny(float* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = p[i] * 0.5f + 1.0f;
}

struct Packed {
  float* p;
  long long pad[7];
  int n;
};

extern "C" __global__ void tiny_packed(Packed a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < a.n) a.p[i] = a.p[i] * 0.5f + 1.0f;
}

extern "C" __global__ void spin(long long ns) {
  long long start = clock64();
  while (clock64() - start < ns * 2) {
  }
}

namespace {

// Host microseconds of each launch of a burst of `count` tiny launches on the legacy
// stream, after the GPU was left `busy_us` of work (0: idle), medians over 60 bursts.
void burstProfile(CUfunction fn, void** args, int count, int busy_us) {
  std::vector<std::vector<double>> per_position(count);
  for (int b = 0; b < 60; ++b) {
    cudaDeviceSynchronize();
    if (busy_us > 0) spin<<<1, 1>>>(busy_us * 1000LL);
    auto last = std::chrono::steady_clock::now();
    for (int i = 0; i < count; ++i) {
      cuLaunchKernel(fn, 1, 1, 1, 64, 1, 1, 0, nullptr, args, nullptr);
      auto now = std::chrono::steady_clock::now();
      per_position[i].push_back(std::chrono::duration<double, std::micro>(now - last).count());
      last = now;
    }
  }
  cudaDeviceSynchronize();
  std::printf("  burst of %d, GPU busy %4d us first:", count, busy_us);
  for (int i = 0; i < count; ++i) {
    auto& v = per_position[i];
    std::sort(v.begin(), v.end());
    if (i < 6 || i == count - 1) std::printf(" %5.2f", v[v.size() / 2]);
  }
  std::printf("\n");
}

#define CHECK_RT(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); return; } } while (0)
#define CHECK_CU(x) do { CUresult r = (x); if (r != CUDA_SUCCESS) { const char* s; cuGetErrorName(r, &s); std::printf("%s: %s\n", #x, s); return; } } while (0)

template <class Launch>
double perLaunchUs(Launch&& launch, int per_sample) {
  std::vector<double> samples;
  for (int w = 0; w < 200; ++w) launch();
  cudaDeviceSynchronize();
  for (int s = 0; s < 60; ++s) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < per_sample; ++i) launch();
    auto t1 = std::chrono::steady_clock::now();
    cudaDeviceSynchronize();
    samples.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / per_sample);
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

}  // namespace

extern "C" void launch_cost_run(const char* cubin_path) {
  float* p = nullptr;
  CHECK_RT(cudaMalloc(&p, 1024 * sizeof(float)));
  int n = 64;
  CUfunction runtime_fn;
  CHECK_RT(cudaGetFuncBySymbol(&runtime_fn, (const void*)tiny));
  std::ifstream in(cubin_path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string image = ss.str();
  CUmodule module;
  CHECK_CU(cuModuleLoadData(&module, image.data()));
  CUfunction module_fn, module_packed;
  CHECK_CU(cuModuleGetFunction(&module_fn, module, "tiny"));
  CHECK_CU(cuModuleGetFunction(&module_packed, module, "tiny_packed"));
  CUlibrary library;
  CHECK_CU(cuLibraryLoadData(&library, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUkernel lib_kernel;
  CHECK_CU(cuLibraryGetKernel(&lib_kernel, library, "tiny"));
  cudaStream_t own;
  CHECK_RT(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
  Packed packed{p, {}, n};
  void* args[] = {&p, &n};
  void* packed_args[] = {&packed};
  std::printf("host us per launch by position in a burst (positions 0-5 and the last)\n");
  for (int busy : {0, 50, 500}) {
    burstProfile(module_fn, args, 16, busy);
    burstProfile(module_fn, args, 128, busy);
  }
  for (int per_sample : {16, 128}) {
    std::printf("launches per sample %d: median host us per launch\n", per_sample);
    auto row = [&](const char* name, double us) { std::printf("  %-52s %6.2f\n", name, us); };
    row("runtime <<<>>> legacy stream", perLaunchUs([&] { tiny<<<1, 64>>>(p, n); }, per_sample));
    row("runtime <<<>>> own stream", perLaunchUs([&] { tiny<<<1, 64, 0, own>>>(p, n); }, per_sample));
    row("cuLaunchKernel, runtime's function, legacy stream", perLaunchUs([&] {
      cuLaunchKernel(runtime_fn, 1, 1, 1, 64, 1, 1, 0, nullptr, args, nullptr); }, per_sample));
    row("cuLaunchKernel, cubin module, legacy stream", perLaunchUs([&] {
      cuLaunchKernel(module_fn, 1, 1, 1, 64, 1, 1, 0, nullptr, args, nullptr); }, per_sample));
    row("cuLaunchKernel, cubin module, CU_STREAM_PER_THREAD", perLaunchUs([&] {
      cuLaunchKernel(module_fn, 1, 1, 1, 64, 1, 1, 0, CU_STREAM_PER_THREAD, args, nullptr); }, per_sample));
    row("cuLaunchKernel, cubin module, own stream", perLaunchUs([&] {
      cuLaunchKernel(module_fn, 1, 1, 1, 64, 1, 1, 0, (CUstream)own, args, nullptr); }, per_sample));
    row("cuLaunchKernel, cubin module, packed 72 B struct", perLaunchUs([&] {
      cuLaunchKernel(module_packed, 1, 1, 1, 64, 1, 1, 0, nullptr, packed_args, nullptr); }, per_sample));
    row("cuLaunchKernel, cubin module, block of 1024", perLaunchUs([&] {
      cuLaunchKernel(module_fn, 1, 1, 1, 1024, 1, 1, 0, nullptr, args, nullptr); }, per_sample));
    row("cuLaunchKernel, cubin module, 132 blocks of 256", perLaunchUs([&] {
      cuLaunchKernel(module_fn, 132, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr); }, per_sample));
    row("cuLaunchKernel, library kernel (CUkernel)", perLaunchUs([&] {
      cuLaunchKernel((CUfunction)lib_kernel, 1, 1, 1, 64, 1, 1, 0, nullptr, args, nullptr); }, per_sample));
    row("cudaLaunchKernel, library kernel (CUkernel)", perLaunchUs([&] {
      cudaLaunchKernel((const void*)lib_kernel, dim3(1), dim3(64), args, 0, nullptr); }, per_sample));
    row("cuCtxGetCurrent alone", perLaunchUs([&] { CUcontext c; cuCtxGetCurrent(&c); }, per_sample));
  }
  std::fflush(stdout);
}
