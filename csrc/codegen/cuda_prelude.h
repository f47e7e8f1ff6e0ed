// The helpers every generated CUDA kernel starts with. NVRTC compiles them with no
// headers at all (fixed-width integer types are declared here), so a kernel compiles
// in well under a second. Float math is CUDA's precise library (no fast-math), so
// results match eager's.
#pragma once

namespace fuser::codegen {

inline const char* kCudaPrelude = R"FUSER(
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;

#define FX_INLINE static __device__ __forceinline__
#define FX_INFF __int_as_float(0x7f800000)
#define FX_NANF __int_as_float(0x7fffffff)
#define FX_INF __longlong_as_double(0x7ff0000000000000LL)
#define FX_NAN __longlong_as_double(0x7fffffffffffffffLL)

// N elements loaded or stored as one aligned access (16 bytes at most).
template <typename T, int N> struct alignas(sizeof(T) * N) FxVec { T v[N]; };

// A kernel never writes the tensors it reads (outputs are fresh or cat buffers), so
// inputs load through the read-only data cache: an LSTM cell's kernel, which rereads
// its biases in every row, ran 3% faster on the H100.
template <typename T> FX_INLINE T fx_ld(const T* p) { return __ldg(p); }
template <typename V> FX_INLINE V fx_ld_vec(const void* p) {
  V v;
  if constexpr (sizeof(V) == 16) *(uint4*)&v = __ldg((const uint4*)p);
  else if constexpr (sizeof(V) == 8) *(uint2*)&v = __ldg((const uint2*)p);
  else if constexpr (sizeof(V) == 4) *(unsigned*)&v = __ldg((const unsigned*)p);
  else *(unsigned short*)&v = __ldg((const unsigned short*)p);
  return v;
}
// Column kernels in shared memory (Kernel::columns_in_shared): a thread's copy of
// kBytes to shared memory, asynchronous where the GPU has cp.async (sm_80 and later) and
// the size allows (4, 8 or 16 bytes), so that all of a thread's copies are in flight at
// once; fx_copies_done waits for the thread's own.
template <int kBytes> FX_INLINE void fx_copy_to_shared(void* dst, const void* src) {
#if __CUDA_ARCH__ >= 800
  if constexpr (kBytes == 4 || kBytes == 8 || kBytes == 16) {
    unsigned at;  // the shared window's address (no header declares the intrinsic here)
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(at) : "l"(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" :: "r"(at), "l"(src), "n"(kBytes)
                 : "memory");
    return;
  }
#endif
  if constexpr (kBytes == 16) *(uint4*)dst = __ldg((const uint4*)src);
  else if constexpr (kBytes == 8) *(uint2*)dst = __ldg((const uint2*)src);
  else if constexpr (kBytes == 4) *(unsigned*)dst = __ldg((const unsigned*)src);
  else if constexpr (kBytes == 2) *(unsigned short*)dst = __ldg((const unsigned short*)src);
  else if constexpr (kBytes == 1) *(unsigned char*)dst = __ldg((const unsigned char*)src);
  else static_assert(kBytes == 1, "fx_copy_to_shared copies 1, 2, 4, 8 or 16 bytes");
}
FX_INLINE void fx_copies_done() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

FX_INLINE float fx_h2f(uint16_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
FX_INLINE uint16_t fx_f2h(float f) { uint16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
FX_INLINE float fx_round_h(float x) { return fx_h2f(fx_f2h(x)); }
FX_INLINE float fx_bf2f(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
// sm_80 and later round in one instruction (a NaN becomes 0x7fff rather than eager's
// 0x7fc0: both are NaN); older GPUs round with integer arithmetic, as c10 does.
FX_INLINE uint16_t fx_f2bf(float f) {
#if __CUDA_ARCH__ >= 800
  uint16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  uint32_t x = __float_as_uint(f);
  uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return (uint16_t)(f != f ? 0x7fc0u : rounded);
#endif
}
// Floating values to int64 and int32 as ATen's CUDA casts give them (cvt.rzi: NaN to 0,
// out of range saturated), written as the instruction so that no fold of a round trip
// (float)(int64_t)x into a truncation can keep a NaN.
FX_INLINE int64_t fx_f2i64(float x) { int64_t r; asm("cvt.rzi.s64.f32 %0, %1;" : "=l"(r) : "f"(x)); return r; }
FX_INLINE int64_t fx_f2i64(double x) { int64_t r; asm("cvt.rzi.s64.f64 %0, %1;" : "=l"(r) : "d"(x)); return r; }
FX_INLINE int32_t fx_f2i32(float x) { int32_t r; asm("cvt.rzi.s32.f32 %0, %1;" : "=r"(r) : "f"(x)); return r; }
FX_INLINE int32_t fx_f2i32(double x) { int32_t r; asm("cvt.rzi.s32.f64 %0, %1;" : "=r"(r) : "d"(x)); return r; }
// Narrower integers as ATen's CUDA casts: static_cast, and through int64 to uint8 (c10).
template <typename F> FX_INLINE int16_t fx_f2i16(F x) { return (int16_t)x; }
template <typename F> FX_INLINE int8_t fx_f2i8(F x) { return (int8_t)x; }
template <typename F> FX_INLINE uint8_t fx_f2u8(F x) { return (uint8_t)fx_f2i64(x); }
// 16-bit add, subtract and multiply on bits, rounded once: equal to the float op and
// its rounding when both operands are values of the format (native16.h). bfloat16 has
// these instructions from sm_90; older GPUs take the float op and the rounding.
#define FX_OP16(name, instruction)                                        \
  FX_INLINE uint16_t name(uint16_t a, uint16_t b) {                       \
    uint16_t r;                                                           \
    asm(instruction " %0, %1, %2;" : "=h"(r) : "h"(a), "h"(b));           \
    return r;                                                             \
  }
FX_OP16(fx_hadd, "add.rn.f16")
FX_OP16(fx_hsub, "sub.rn.f16")
FX_OP16(fx_hmul, "mul.rn.f16")
#if __CUDA_ARCH__ >= 900
FX_OP16(fx_bfadd, "add.rn.bf16")
FX_OP16(fx_bfsub, "sub.rn.bf16")
FX_OP16(fx_bfmul, "mul.rn.bf16")
#else
FX_INLINE uint16_t fx_bfadd(uint16_t a, uint16_t b) { return fx_f2bf(fx_bf2f(a) + fx_bf2f(b)); }
FX_INLINE uint16_t fx_bfsub(uint16_t a, uint16_t b) { return fx_f2bf(fx_bf2f(a) - fx_bf2f(b)); }
FX_INLINE uint16_t fx_bfmul(uint16_t a, uint16_t b) { return fx_f2bf(fx_bf2f(a) * fx_bf2f(b)); }
#endif

// A quotient of two values of a 16-bit format rounded to it as eager rounds it (float
// division, then the format), for a divisor the same over a row (a normalization's
// deviation) whose reciprocal `rb` = 1 / b the compiler takes out of the loop: a * rb
// lies within 2 float ulps of the float quotient, so it rounds to the same 16-bit value
// unless it lies within 3 ulps of a midpoint between two, or where the format's spacing
// shrinks (its subnormals; float's). Those few take the division, as do bfloat16 rows
// whose reciprocal is not a normal float. Callers pass values of the format only
// (WalkNative16): a float16 b is then never too small or large for its reciprocal, and
// a zero, infinite or NaN a or b gives the division's value (rb infinite or zero, a * rb
// the same zero, infinity or NaN). Checked against eager's rounding on all 2^32 pairs
// of each format by emulation (tools/check_row_quotient.py).
FX_INLINE uint16_t fx_hquot(float a, float b, float rb) {
  const float q = a * rb;
  const unsigned low = __float_as_uint(q) & 0x1fffu;
  if (__builtin_expect(low - 0x0ffdu <= 6u || (fabsf(q) < 0x1p-14f && q != 0.0f), 0)) {
    return fx_f2h(a / b);
  }
  return fx_f2h(q);
}
FX_INLINE uint16_t fx_bfquot(float a, float b, float rb) {
  const float q = a * rb;
  const unsigned low = __float_as_uint(q) & 0xffffu;
  const bool narrow = (fabsf(q) < 0x1p-126f && q != 0.0f) ||
                      !(fabsf(rb) >= 0x1p-126f && fabsf(rb) <= 0x1.fffffep127f);
  if (__builtin_expect(low - 0x7ffdu <= 6u || narrow, 0)) return fx_f2bf(a / b);
  return fx_f2bf(q);
}

// Their quick forms, for a step of a walk that stores and sums nothing else: the
// product's rounding, and in `t` the least distance of a product's low bits from a
// midpoint and the least magnitude (less one, so that zero is the largest); where
// fx_hquot_redo / fx_bfquot_redo find either within fx_hquot's / fx_bfquot's tests (or a
// bfloat16 row's reciprocal is not a normal float), the walk computes the step again
// with them. Minima, not flags: a test and branch per element were a third of a float16
// LayerNorm's storing walk, and flags took a predicate and a select each.
struct FxQuotTest {
  unsigned near = 0xffffffffu;
  unsigned small = 0xffffffffu;
};
FX_INLINE uint16_t fx_hquot_quick(float a, float rb, FxQuotTest& t) {
  const float q = a * rb;
  const unsigned u = __float_as_uint(q);
  t.near = min(t.near, (u - 0x0ffdu) & 0x1fffu);
  t.small = min(t.small, (u & 0x7fffffffu) - 1u);
  return fx_f2h(q);
}
FX_INLINE bool fx_hquot_redo(const FxQuotTest& t) {
  return t.near <= 6u || t.small < 0x387fffffu;  // |q| < 2^-14
}
FX_INLINE uint16_t fx_bfquot_quick(float a, float rb, FxQuotTest& t) {
  const float q = a * rb;
  const unsigned u = __float_as_uint(q);
  const bool normal_rb = fabsf(rb) >= 0x1p-126f && fabsf(rb) <= 0x1.fffffep127f;
  t.near = min(t.near, (u - 0x7ffdu) & 0xffffu);
  t.small = min(t.small, normal_rb ? (u & 0x7fffffffu) - 1u : 0u);
  return fx_f2bf(q);
}
FX_INLINE bool fx_bfquot_redo(const FxQuotTest& t) {
  return t.near <= 6u || t.small < 0x007fffffu;  // |q| < 2^-126
}

// The math the shared helpers (common_prelude.h) need, in CUDA's spelling.
FX_INLINE float fx_fmod(float a, float b) { return fmodf(a, b); }
FX_INLINE double fx_fmod(double a, double b) { return fmod(a, b); }
FX_INLINE float fx_floor(float a) { return floorf(a); }
FX_INLINE double fx_floor(double a) { return floor(a); }
FX_INLINE float fx_copysign(float a, float b) { return copysignf(a, b); }
FX_INLINE double fx_copysign(double a, double b) { return copysign(a, b); }

FX_INLINE float fx_expf(float x) { return expf(x); }
FX_INLINE float fx_sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
FX_INLINE double fx_sigmoidd(double x) { return 1.0 / (1.0 + exp(-x)); }
// A float16 sigmoid with eager's bits and no branch. Eager's 1 / d (d = 1 + exp(-x)) is
// IEEE division: a reciprocal refined by one FMA step, behind a test of d's exponent
// that sends d >= 2^126 to a slow path. Clamped to 2^64 (NaN kept), d never goes there,
// and 1 / 2^64 rounds to 0 in float16 as every smaller quotient does. Without the branch
// the compiler interleaves a thread's elements: a float16 column sum of g * sigmoid(x)
// over [32768, 1024] took 66.1 us on the H100 with the branch and 58.8 without.
FX_INLINE float fx_sigmoid_half(float x) {
  float d = 1.0f + expf(-x), r;
#if __CUDA_ARCH__ >= 800
  asm("min.NaN.f32 %0, %0, 0f5F800000;" : "+f"(d));  // 2^64
#else
  d = d > 0x1p64f ? 0x1p64f : d;
#endif
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
  return fmaf(r, fmaf(-d, r, 1.0f), r);
}
FX_INLINE float fx_tanhf(float x) { return tanhf(x); }
// The C++ kernels' vectorizable forms (cpp_vector_math.h, cpp_trig_prelude.h) are CUDA's
// library functions here.
FX_INLINE float fx_logf(float x) { return logf(x); }
FX_INLINE float fx_log2f(float x) { return log2f(x); }
FX_INLINE float fx_log10f(float x) { return log10f(x); }
FX_INLINE float fx_log1pf(float x) { return log1pf(x); }
FX_INLINE float fx_expm1f(float x) { return expm1f(x); }
FX_INLINE float fx_sinf(float x) { return sinf(x); }
FX_INLINE float fx_cosf(float x) { return cosf(x); }
FX_INLINE float fx_tanf(float x) { return tanf(x); }
FX_INLINE float fx_powf(float x, float y) { return powf(x, y); }
FX_INLINE float fx_erff(float x) { return erff(x); }
FX_INLINE float fx_atanf(float x) { return atanf(x); }
FX_INLINE float fx_asinf(float x) { return asinf(x); }
FX_INLINE float fx_acosf(float x) { return acosf(x); }
FX_INLINE float fx_atan2f(float y, float x) { return atan2f(y, x); }
FX_INLINE float fx_sinhf(float x) { return sinhf(x); }
FX_INLINE float fx_coshf(float x) { return coshf(x); }
FX_INLINE float fx_fmodf(float a, float b) { return fmodf(a, b); }

)FUSER";

}  // namespace fuser::codegen
