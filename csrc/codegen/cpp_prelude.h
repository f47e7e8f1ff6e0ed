// The helper functions every generated C++ kernel starts with. No header is included:
// <cmath> alone triples a kernel's compile time, so the C math functions the printers
// use are declared here (the compiler still treats them as builtins).
// Helpers used in the element loop are branch-free (selects, not ifs) so that
// the host compiler vectorizes the loop.
#pragma once

namespace fuser::codegen {

inline const char* kCppPrelude = R"FUSER(
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long int64_t;
typedef unsigned long uint64_t;

#define FX_MATH1(name) double name(double); float name##f(float);
#define FX_MATH2(name) double name(double, double); float name##f(float, float);
extern "C" {
FX_MATH1(fabs) FX_MATH1(sqrt) FX_MATH1(exp) FX_MATH1(expm1) FX_MATH1(log) FX_MATH1(log1p)
FX_MATH1(log2) FX_MATH1(log10) FX_MATH1(sin) FX_MATH1(cos) FX_MATH1(tan) FX_MATH1(asin)
FX_MATH1(acos) FX_MATH1(atan) FX_MATH1(sinh) FX_MATH1(cosh) FX_MATH1(tanh) FX_MATH1(erf)
FX_MATH1(erfc) FX_MATH1(floor) FX_MATH1(ceil) FX_MATH1(nearbyint) FX_MATH1(trunc)
FX_MATH2(pow) FX_MATH2(atan2) FX_MATH2(fmod) FX_MATH2(copysign)
}

#define FX_INLINE static inline __attribute__((always_inline))

// A buffer one thread keeps for one kernel's held values, grown to the longest row asked
// for and freed when the thread ends (kernels are never unloaded). atLeast gives null
// where the allocation failed: the kernel then computes its values again instead.
template <typename T>
struct FxThreadBuffer {
  T* p = nullptr;
  int64_t n = 0;
  ~FxThreadBuffer() { __builtin_free(p); }
  T* atLeast(int64_t want) {
    if (n >= want) return p;
    __builtin_free(p);
    p = (T*)__builtin_malloc(want * (int64_t)sizeof(T));
    n = p ? want : 0;
    return p;
  }
};

// Transposes an 8 x 8 square of elements of Lane's size: dst row p, element q = src row
// q, element p (rows src_stride and dst_stride elements apart). Eight vector loads, the
// shuffles of an AVX 8 x 8 transpose, eight vector stores.
template <typename Lane>
FX_INLINE void fx_transpose8x8(const void* src, int64_t src_stride, void* dst,
                               int64_t dst_stride) {
  typedef Lane V __attribute__((vector_size(8 * sizeof(Lane))));
  const char* s = (const char*)src;
  char* d = (char*)dst;
  const int64_t src_row = src_stride * (int64_t)sizeof(Lane);
  const int64_t dst_row = dst_stride * (int64_t)sizeof(Lane);
  V r[8], t[8], u[8];
  for (int q = 0; q < 8; ++q) __builtin_memcpy(&r[q], s + q * src_row, sizeof(V));
  for (int k = 0; k < 4; ++k) {
    const V a = r[2 * k], b = r[2 * k + 1];
    t[2 * k] = __builtin_shuffle(a, b, (V){0, 8, 1, 9, 4, 12, 5, 13});
    t[2 * k + 1] = __builtin_shuffle(a, b, (V){2, 10, 3, 11, 6, 14, 7, 15});
  }
  for (int k = 0; k < 2; ++k) {
    for (int h = 0; h < 2; ++h) {
      const V a = t[4 * k + h], b = t[4 * k + h + 2];
      u[4 * k + 2 * h] = __builtin_shuffle(a, b, (V){0, 1, 8, 9, 4, 5, 12, 13});
      u[4 * k + 2 * h + 1] = __builtin_shuffle(a, b, (V){2, 3, 10, 11, 6, 7, 14, 15});
    }
  }
  for (int p = 0; p < 4; ++p) {
    const V lo = __builtin_shuffle(u[p], u[p + 4], (V){0, 1, 2, 3, 8, 9, 10, 11});
    const V hi = __builtin_shuffle(u[p], u[p + 4], (V){4, 5, 6, 7, 12, 13, 14, 15});
    __builtin_memcpy(d + p * dst_row, &lo, sizeof(V));
    __builtin_memcpy(d + (p + 4) * dst_row, &hi, sizeof(V));
  }
}
// Sixteen floats as one value (one AVX-512 register, two AVX ones), for row sums printed
// as explicit vectors (cpp_row_printer.cpp): loaded from any address, summed by halves.
typedef float fx_f32x16 __attribute__((vector_size(64)));
typedef float fx_f32x8 __attribute__((vector_size(32)));
typedef float fx_f32x4 __attribute__((vector_size(16)));
typedef int fx_i32x16 __attribute__((vector_size(64)));
// Lanes at or after `first` of v, the others 0.
FX_INLINE fx_f32x16 fx_lanes_from(fx_f32x16 v, int first) {
  const fx_i32x16 lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const fx_f32x16 zero = {};
  return lane >= first ? v : zero;
}
FX_INLINE fx_f32x16 fx_load16(const float* p) {
  fx_f32x16 v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}
// Sixteen bfloat16 values as floats (each its bits shifted into a float's high half).
typedef unsigned short fx_u16x16 __attribute__((vector_size(32)));
typedef unsigned int fx_u32x16 __attribute__((vector_size(64)));
FX_INLINE fx_f32x16 fx_load16_bf(const uint16_t* p) {
  fx_u16x16 h;
  __builtin_memcpy(&h, p, sizeof(h));
  const fx_u32x16 w = __builtin_convertvector(h, fx_u32x16) << 16;
  fx_f32x16 v;
  __builtin_memcpy(&v, &w, sizeof(v));
  return v;
}
FX_INLINE float fx_sum16(fx_f32x16 v) {
  fx_f32x8 lo, hi;
  __builtin_memcpy(&lo, &v, sizeof(lo));
  __builtin_memcpy(&hi, (const char*)&v + sizeof(lo), sizeof(hi));
  const fx_f32x8 s8 = lo + hi;
  fx_f32x4 a, b;
  __builtin_memcpy(&a, &s8, sizeof(a));
  __builtin_memcpy(&b, (const char*)&s8 + sizeof(a), sizeof(b));
  const fx_f32x4 s4 = a + b;
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}
#define FX_INFF __builtin_inff()
#define FX_NANF __builtin_nanf("")
#define FX_INF __builtin_inf()
#define FX_NAN __builtin_nan("")

// float16 and bfloat16 storage is uint16_t; arithmetic happens in float.
// No arithmetic on a float subnormal, which torch.set_flush_denormal(True) reads as 0:
// normal halves rebias their exponent as integers, subnormal ones (m * 2^-24) come from
// (0.5 + m * 2^-24) - 0.5; infinities and NaNs keep an all-ones exponent.
FX_INLINE float fx_h2f(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t bits = (uint32_t)(h & 0x7fffu) << 13;
  uint32_t out = bits + 0x38000000u;  // the exponent's bias from 15 to 127
  const float subnormal = __builtin_bit_cast(float, 0x3f000000u | (h & 0x3ffu)) - 0.5f;
  out = (h & 0x7c00u) == 0 ? __builtin_bit_cast(uint32_t, subnormal) : out;
  out = (h & 0x7c00u) == 0x7c00u ? (bits | 0x7f800000u) : out;
  return __builtin_bit_cast(float, out | sign);
}
FX_INLINE uint16_t fx_f2h(float f) {
  // Round to nearest even through float arithmetic, as c10::Half does.
  uint32_t x = __builtin_bit_cast(uint32_t, f);
  uint32_t sign = x & 0x80000000u;
  uint32_t ax = x ^ sign;
  float fa = __builtin_bit_cast(float, ax);
  float base = (fa * 5.192296858534828e+33f) * 7.703719777548943e-34f;
  uint32_t shl1_w = ax + ax;
  uint32_t exp_bits = shl1_w & 0xff000000u;
  exp_bits = exp_bits < 0x71000000u ? 0x71000000u : exp_bits;
  base = __builtin_bit_cast(float, (exp_bits >> 1) + 0x07800000u) + base;
  uint32_t bits = __builtin_bit_cast(uint32_t, base);
  uint32_t exp_part = (bits >> 13) & 0x00007c00u;
  uint32_t mant_part = bits & 0x00000fffu;
  uint32_t nonsign = exp_part + mant_part;
  nonsign = shl1_w > 0xff000000u ? 0x7e00u : nonsign;
  return (uint16_t)((sign >> 16) | nonsign);
}
// float16 runs converted 8 elements an instruction by F16C where the compiler targets it
// (-march=native), else element by element as above (the same bits but for a NaN's
// payload). Row kernels stage their float16 rows through these: fx_h2f and fx_f2h take
// about 8 and 15 vector operations per vector of elements.
FX_INLINE void fx_h2f_run(const uint16_t* __restrict__ src, float* __restrict__ dst, int64_t n) {
  int64_t i = 0;
#ifdef __F16C__
  typedef short fx_h8 __attribute__((vector_size(16)));
  for (; i + 8 <= n; i += 8) {
    fx_h8 h;
    __builtin_memcpy(&h, src + i, sizeof(h));
    const auto f = __builtin_ia32_vcvtph2ps256(h);
    __builtin_memcpy(dst + i, &f, sizeof(f));
  }
#endif
  for (; i < n; ++i) dst[i] = fx_h2f(src[i]);
}
FX_INLINE void fx_f2h_run(const float* __restrict__ src, uint16_t* __restrict__ dst, int64_t n) {
  int64_t i = 0;
#ifdef __F16C__
  typedef float fx_f8 __attribute__((vector_size(32)));
  for (; i + 8 <= n; i += 8) {
    fx_f8 f;
    __builtin_memcpy(&f, src + i, sizeof(f));
    const auto h = __builtin_ia32_vcvtps2ph256(f, 0);  // to nearest, ties to even
    __builtin_memcpy(dst + i, &h, sizeof(h));
  }
#endif
  for (; i < n; ++i) dst[i] = fx_f2h(src[i]);
}
// fx_h2f(fx_f2h(x)) in float arithmetic, the same bits for every float (checked over all
// 2^32): a value float16 represents rounded to its 10 significand bits, ties to even.
FX_INLINE float fx_round_h(float x) {
  const uint32_t u = __builtin_bit_cast(uint32_t, x);
  const uint32_t sign = u & 0x80000000u, a = u ^ sign;
  uint32_t r = (a + 0xfffu + ((a >> 13) & 1u)) & ~0x1fffu;
  // Past 65504: infinity. Below 2^-14 (float16's subnormals): multiples of 2^-24.
  r = r > 0x477fe000u ? 0x7f800000u : r;
  const float tiny = (__builtin_bit_cast(float, a) + 0.5f) - 0.5f;
  r = a < 0x38800000u ? __builtin_bit_cast(uint32_t, tiny) : r;
  r = a > 0x7f800000u ? 0x7fc00000u : r;  // NaN: the quiet one fx_f2h gives
  return __builtin_bit_cast(float, r | sign);
}
FX_INLINE float fx_bf2f(uint16_t h) { return __builtin_bit_cast(float, (uint32_t)h << 16); }
FX_INLINE uint16_t fx_f2bf(float f) {
  uint32_t x = __builtin_bit_cast(uint32_t, f);
  uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return (uint16_t)(f != f ? 0x7fc0u : rounded);
}
// Floating values to int64 and int32 as x86's conversions give them to ATen's CPU casts:
// NaN, infinities and values out of range become the type's minimum ("integer
// indefinite"). A plain cast leaves those undefined, and g++ turns (float)(int64_t)x
// into truncf(x), which keeps a NaN.
FX_INLINE int64_t fx_f2i64(float x) {
  return x >= -0x1p63f && x < 0x1p63f ? (int64_t)x : (int64_t)(-0x7fffffffffffffffL - 1);
}
FX_INLINE int64_t fx_f2i64(double x) {
  return x >= -0x1p63 && x < 0x1p63 ? (int64_t)x : (int64_t)(-0x7fffffffffffffffL - 1);
}
FX_INLINE int32_t fx_f2i32(float x) {
  return x >= -0x1p31f && x < 0x1p31f ? (int32_t)x : (int32_t)(-0x7fffffff - 1);
}
FX_INLINE int32_t fx_f2i32(double x) {
  return x > -0x1p31 - 1.0 && x < 0x1p31 ? (int32_t)x : (int32_t)(-0x7fffffff - 1);
}
// Narrower integers: the low bits, of the int32 conversion (int8, int16) or, as c10's
// cast to uint8 goes, of the int64 one.
template <typename F> FX_INLINE int16_t fx_f2i16(F x) { return (int16_t)fx_f2i32(x); }
template <typename F> FX_INLINE int8_t fx_f2i8(F x) { return (int8_t)fx_f2i32(x); }
template <typename F> FX_INLINE uint8_t fx_f2u8(F x) { return (uint8_t)fx_f2i64(x); }

// exp for float, vectorizable: exp(x) = 2^k * exp(r) with |r| <= ln2/2 and a degree-6
// polynomial for exp(r) (about 1 ulp). fx_exp_reduced gives exp(r) for a clamped x and
// stores k; the callers scale by 2^k. Clamps are written so that they become min/max
// instructions and a NaN passes through them.
FX_INLINE float fx_pow2i(int k) { return __builtin_bit_cast(float, (uint32_t)(k + 127) << 23); }
FX_INLINE float fx_exp_reduced(float xc, int* k_out) {
  float k = __builtin_nearbyintf(xc * 1.44269504088896341f);
  float r = xc - k * 0.693359375f;
  r = r + k * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  *k_out = (int)k;
  return (p * (r * r) + r) + 1.0f;
}
// 2^k is applied in two halves, so results into the subnormal range stay right and
// x >= 89 overflows to inf by itself. Below -104 the result rounds to 0: those lanes
// compute exp(0) and select 0, since a product that underflows takes a microcode assist
// on x86 (a causal mask's -inf made a masked softmax 4x slower than a plain one). The 0
// is a mask on e's bits, not a select: GCC carried a select's condition into a caller's
// own comparisons of the result (log1p's in softplus) as selects between masks, which it
// does not vectorize.
FX_INLINE float fx_expf(float x) {
  const bool zero = x < -104.0f;
  float xc = x > 89.0f ? 89.0f : x;
  xc = zero ? 0.0f : xc;
  int k;
  float y = fx_exp_reduced(xc, &k);
  int k1 = k >> 1;
  const float e = y * fx_pow2i(k1) * fx_pow2i(k - k1);
  const uint32_t keep = (uint32_t)0 - (uint32_t)!zero;  // NaN keeps its bits
  return __builtin_bit_cast(float, __builtin_bit_cast(uint32_t, e) & keep);
}
// exp for x <= 0 where results below float's normal range may read as 0: erf and tanh
// add them to 1, which absorbs anything below 2^-25. One scaling and one clamp instead
// of fx_expf's two each: about 20% off gelu's kernel time.
FX_INLINE float fx_expf_nonpos(float x) {
  int k;
  float y = fx_exp_reduced(x < -87.0f ? -87.0f : x, &k);
  return y * fx_pow2i(k);
}
FX_INLINE double fx_expd(double x) { return exp(x); }
FX_INLINE float fx_sigmoidf(float x) { return 1.0f / (1.0f + fx_expf(-x)); }
FX_INLINE double fx_sigmoidd(double x) { return 1.0 / (1.0 + exp(-x)); }
FX_INLINE float fx_sigmoid_half(float x) { return fx_sigmoidf(x); }
// tanh(x) = sign(x) * (1 - e) / (1 + e), e = exp(-2|x|): no overflow, vectorizable;
// small |x| uses the odd Taylor series, where the quotient would cancel. |x| is a fabs,
// not a select on the sign: from a select GCC computed what follows for both signs
// (fx_erff's division twice a vector: gelu(x + bias) took 16% longer in float32, 18% in
// bfloat16); with fabs every float but NaN gives the same bits (all 2^32 checked; a
// NaN's sign may differ).
FX_INLINE float fx_tanhf(float x) {
  float ax = __builtin_fabsf(x);
  float e = fx_expf_nonpos(-2.0f * ax);
  float t = (1.0f - e) / (1.0f + e);
  t = x < 0 ? -t : t;
  float x2 = x * x;
  float small = x * (1.0f + x2 * (-0.333333333f + x2 * (0.133333333f + x2 * -0.0539682540f)));
  return ax < 0.0625f ? small : t;  // a NaN has propagated through every step
}
// erf for float, vectorizable: Abramowitz and Stegun 7.1.26 (absolute error below
// 1.5e-7, the same approximation ATen's vectorized erf uses).
FX_INLINE float fx_erff(float x) {
  float ax = __builtin_fabsf(x);
  float t = 1.0f / (1.0f + 0.3275911f * ax);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  float r = 1.0f - p * t * fx_expf_nonpos(-ax * ax);
  // x's sign bit put on as ATen's vectorized erf does (erf(-0.0) is -0.0).
  const uint32_t sign = __builtin_bit_cast(uint32_t, x) & 0x80000000u;
  return __builtin_bit_cast(float, __builtin_bit_cast(uint32_t, r) ^ sign);
}

// The math the shared helpers (common_prelude.h) need, in C++'s spelling (float fmod is
// the vector math's fx_fmodf).
FX_INLINE double fx_fmod(double a, double b) { return fmod(a, b); }
FX_INLINE float fx_floor(float a) { return floorf(a); }
FX_INLINE double fx_floor(double a) { return floor(a); }
FX_INLINE float fx_copysign(float a, float b) { return copysignf(a, b); }
FX_INLINE double fx_copysign(double a, double b) { return copysign(a, b); }
)FUSER";

}  // namespace fuser::codegen
