// The fuser::max_pool2d operator (runtime/max_pool_op.h).
//
// ATen's channels-last CUDA max pool took 123.5 us for resnet50's stem at batch 32 on
// the H200 (103 MB read, 26 MB written: four times the time those bytes take at copy
// bandwidth). Here each thread takes a 16-byte vector of adjacent channels of one
// output pixel and walks its window, so every load is a whole vector and a warp's loads
// are contiguous; the window's overlap (a 3x3/2 pool reads each input 2.25 times) is
// served by the caches. Values are eager's bit for bit: the kernel compares in float
// (exact for half and bfloat16) and stores the selected element's own bits, and a NaN
// wins as ATen's `val > max || isnan(val)` makes it win.
#include "runtime/max_pool_op.h"

#include <ATen/ATen.h>
#include <c10/core/MemoryFormat.h>
#include <torch/csrc/jit/runtime/custom_operator.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <iterator>
#include <optional>
#include <vector>

#include "runtime/cuda/cuda_backend.h"

namespace fuser::runtime {
namespace {

constexpr const char* kPoolKernelBody = R"(
struct __align__(sizeof(S) * V) Vec { S v[V]; };
extern "C" __global__ void fuser_max_pool_nhwc(
    const Vec* __restrict__ in, Vec* __restrict__ out, long long total, int H, int W,
    int CV, int OH, int OW, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW) {
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total;
       t += (long long)gridDim.x * blockDim.x) {
    const int cv = (int)(t % CV);
    long long p = t / CV;
    const int ow = (int)(p % OW);
    p /= OW;
    const int oh = (int)(p % OH);
    const long long n = p / OH;
    float best[V];
    Vec result;
#pragma unroll
    for (int u = 0; u < V; ++u) {
      best[u] = -__int_as_float(0x7f800000);
      result.v[u] = kNegativeInfinity;
    }
    const int h0 = oh * SH - PH;
    const int w0 = ow * SW - PW;
    for (int i = 0; i < KH; ++i) {
      const int ih = h0 + i * DH;
      if (ih < 0 || ih >= H) continue;
      for (int j = 0; j < KW; ++j) {
        const int iw = w0 + j * DW;
        if (iw < 0 || iw >= W) continue;
        const Vec x = in[((n * H + ih) * W + iw) * CV + cv];
#pragma unroll
        for (int u = 0; u < V; ++u) {
          const float f = toFloat(x.v[u]);
          if (f > best[u] || f != f) {
            best[u] = f;
            result.v[u] = x.v[u];
          }
        }
      }
    }
    out[t] = result;
  }
}
)";

constexpr unsigned kPoolBlock = 256;
constexpr int64_t kPoolMaxBlocks = 1 << 20;  // a grid-stride loop takes the rest

// What the kernel needs beyond the tensors: the window, from max_pool2d's arguments as
// ATen reads them (one value for both dims, an empty stride for the kernel's).
struct Window {
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  bool ceil_mode;
};

int64_t pick(c10::IntArrayRef values, size_t i) { return values.size() == 1 ? values[0] : values[i]; }

std::optional<Window> readWindow(c10::IntArrayRef kernel, c10::IntArrayRef stride,
                                 c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                 bool ceil_mode) {
  for (c10::IntArrayRef list : {kernel, padding, dilation}) {
    if (list.size() != 1 && list.size() != 2) return std::nullopt;
  }
  if (!stride.empty() && stride.size() != 1 && stride.size() != 2) return std::nullopt;
  Window w{pick(kernel, 0),   pick(kernel, 1),   0, 0, pick(padding, 0), pick(padding, 1),
           pick(dilation, 0), pick(dilation, 1), ceil_mode};
  w.sh = stride.empty() ? w.kh : pick(stride, 0);
  w.sw = stride.empty() ? w.kw : pick(stride, 1);
  return w;
}

// ATen's output length of one pooled dim (pooling_output_shape).
int64_t pooledLength(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation,
                     bool ceil_mode) {
  const int64_t numerator = in + 2 * pad - dilation * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = numerator / stride + 1;
  if (numerator < 0 && numerator % stride != 0) --out;  // rounds towards -inf
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// Whether ATen accepts the window (otherwise ATen runs, to raise its error): positive
// sizes, strides and dilations, padding of at most half the window.
bool validWindow(const Window& w) {
  if (w.kh <= 0 || w.kw <= 0 || w.sh <= 0 || w.sw <= 0 || w.dh <= 0 || w.dw <= 0) return false;
  return w.ph >= 0 && w.pw >= 0 && w.ph <= w.kh / 2 && w.pw <= w.kw / 2;
}

bool pooledOnCuda(const at::Tensor& self) {
  const c10::ScalarType t = self.scalar_type();
  return self.is_cuda() && self.dim() == 4 && self.numel() > 0 &&
         (t == at::kFloat || t == at::kHalf || t == at::kBFloat16) &&
         self.suggest_memory_format() == at::MemoryFormat::ChannelsLast &&
         self.is_contiguous(at::MemoryFormat::ChannelsLast) &&
         !(self.requires_grad() && at::GradMode::is_enabled());
}

// Built once per process (the launch finds the compiled kernel by its source).
const std::string& sourceFor(c10::ScalarType dtype, bool vectors) {
  static const std::string sources[3][2] = {
      {maxPoolChannelsLastSource(at::kFloat, 1), maxPoolChannelsLastSource(at::kFloat, 4)},
      {maxPoolChannelsLastSource(at::kHalf, 1), maxPoolChannelsLastSource(at::kHalf, 8)},
      {maxPoolChannelsLastSource(at::kBFloat16, 1), maxPoolChannelsLastSource(at::kBFloat16, 8)}};
  const int row = dtype == at::kFloat ? 0 : dtype == at::kHalf ? 1 : 2;
  return sources[row][vectors ? 1 : 0];
}

// The pool of `self` into an [N, C, oh, ow] channels-last result.
at::Tensor maxPoolChannelsLast(const at::Tensor& self, const Window& w, int64_t oh, int64_t ow) {
  const int64_t n = self.size(0), c = self.size(1), h = self.size(2), wd = self.size(3);
  at::Tensor out = at::empty({n, c, oh, ow}, self.options().memory_format(at::MemoryFormat::ChannelsLast));
  if (out.numel() == 0) return out;
  const int64_t bytes = static_cast<int64_t>(self.element_size());
  const int wide = static_cast<int>(16 / bytes);
  const bool aligned = reinterpret_cast<uintptr_t>(self.data_ptr()) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(out.data_ptr()) % 16 == 0;
  const int vector = aligned && c % wide == 0 ? wide : 1;
  const void* in_ptr = self.data_ptr();
  void* out_ptr = out.data_ptr();
  long long total = n * oh * ow * (c / vector);
  int args[] = {static_cast<int>(h),    static_cast<int>(wd),   static_cast<int>(c / vector),
                static_cast<int>(oh),   static_cast<int>(ow),   static_cast<int>(w.kh),
                static_cast<int>(w.kw), static_cast<int>(w.sh), static_cast<int>(w.sw),
                static_cast<int>(w.ph), static_cast<int>(w.pw), static_cast<int>(w.dh),
                static_cast<int>(w.dw)};
  void* params[3 + std::size(args)] = {&in_ptr, &out_ptr, &total};
  for (size_t i = 0; i < std::size(args); ++i) params[3 + i] = &args[i];
  const auto grid = static_cast<unsigned>(
      std::min<int64_t>((total + kPoolBlock - 1) / kPoolBlock, kPoolMaxBlocks));
  launchCudaSource(sourceFor(self.scalar_type(), vector > 1), kMaxPoolChannelsLastKernel, self.device(),
                   grid, kPoolBlock, params);
  return out;
}

bool sizesFitInt(const at::Tensor& self) {
  for (int64_t s : self.sizes()) {
    if (s > std::numeric_limits<int>::max()) return false;
  }
  return true;
}

at::Tensor maxPool2d(const at::Tensor& self, c10::IntArrayRef kernel, c10::IntArrayRef stride,
                     c10::IntArrayRef padding, c10::IntArrayRef dilation, bool ceil_mode) {
  if (pooledOnCuda(self) && sizesFitInt(self)) {
    if (auto w = readWindow(kernel, stride, padding, dilation, ceil_mode); w && validWindow(*w)) {
      const int64_t oh = pooledLength(self.size(2), w->kh, w->ph, w->sh, w->dh, ceil_mode);
      const int64_t ow = pooledLength(self.size(3), w->kw, w->pw, w->sw, w->dw, ceil_mode);
      if (oh > 0 && ow > 0) return maxPoolChannelsLast(self, *w, oh, ow);
    }
  }
  return at::max_pool2d(self, kernel, stride, padding, dilation, ceil_mode);
}

torch::jit::RegisterOperators maxPoolOpRegistration({torch::jit::Operator(
    "fuser::max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
    "int[2] dilation=1, bool ceil_mode=False) -> Tensor",
    [](torch::jit::Stack& stack) {
      const bool ceil_mode = torch::jit::pop(stack).toBool();
      const std::vector<int64_t> dilation = torch::jit::pop(stack).toIntVector();
      const std::vector<int64_t> padding = torch::jit::pop(stack).toIntVector();
      const std::vector<int64_t> stride = torch::jit::pop(stack).toIntVector();
      const std::vector<int64_t> kernel = torch::jit::pop(stack).toIntVector();
      const at::Tensor self = torch::jit::pop(stack).toTensor();
      torch::jit::push(stack, maxPool2d(self, kernel, stride, padding, dilation, ceil_mode));
    },
    c10::AliasAnalysisKind::FROM_SCHEMA)});

}  // namespace

std::string maxPoolChannelsLastSource(c10::ScalarType dtype, int vector) {
  TORCH_CHECK(vector >= 1 && vector * static_cast<int>(c10::elementSize(dtype)) <= 16,
              "fuser: a max pool vector holds at most 16 bytes");
  std::string head = "#define V " + std::to_string(vector) + "\n";
  switch (dtype) {
    case c10::ScalarType::Float:
      head += "typedef float S;\n#define kNegativeInfinity (-__int_as_float(0x7f800000))\n"
              "__device__ __forceinline__ float toFloat(float x) { return x; }\n";
      break;
    case c10::ScalarType::Half:
      head += "typedef unsigned short S;\n#define kNegativeInfinity ((S)0xfc00)\n"
              "__device__ __forceinline__ float toFloat(S h) {\n"
              "  float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f; }\n";
      break;
    case c10::ScalarType::BFloat16:
      head += "typedef unsigned short S;\n#define kNegativeInfinity ((S)0xff80)\n"
              "__device__ __forceinline__ float toFloat(S h) {\n"
              "  return __uint_as_float((unsigned)h << 16); }\n";
      break;
    default:
      TORCH_CHECK(false, "fuser: the max pool kernel takes float, half or bfloat16, not ", dtype);
  }
  return head + kPoolKernelBody;
}

}  // namespace fuser::runtime
