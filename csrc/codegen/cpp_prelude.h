// The helper functions every generated C++ kernel starts with. Only <cmath> and
// <cstdint> are included so that a kernel compiles in well under a second.
// Helpers used in the element loop are branch-free (selects, not ifs) so that
// the host compiler vectorizes the loop.
#pragma once

namespace fuser::codegen {

inline const char* kCppPrelude = R"FUSER(
#include <cmath>
#include <cstdint>

#define FX_INLINE static inline __attribute__((always_inline))

// float16 and bfloat16 storage is uint16_t; arithmetic happens in float.
FX_INLINE float fx_h2f(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t bits = (uint32_t)(h & 0x7fffu) << 13;
  // Rescale the exponent: multiplying by 2^112 turns half's bias into float's and
  // handles subnormals; inf/nan keep an all-ones exponent.
  float mag = __builtin_bit_cast(float, bits) * 5.192296858534828e+33f;
  uint32_t out = __builtin_bit_cast(uint32_t, mag);
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
FX_INLINE float fx_bf2f(uint16_t h) { return __builtin_bit_cast(float, (uint32_t)h << 16); }
FX_INLINE uint16_t fx_f2bf(float f) {
  uint32_t x = __builtin_bit_cast(uint32_t, f);
  uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return (uint16_t)(f != f ? 0x7fc0u : rounded);
}

// exp for float, vectorizable: exp(x) = 2^k * exp(r) with |r| <= ln2/2 and a degree-6
// polynomial for exp(r) (about 1 ulp). 2^k is applied in two halves, so results into
// the subnormal range stay right and x >= 89 overflows to inf by itself. Clamps are
// written so that they become min/max instructions and a NaN passes through them.
FX_INLINE float fx_pow2i(int k) { return __builtin_bit_cast(float, (uint32_t)(k + 127) << 23); }
FX_INLINE float fx_expf(float x) {
  float xc = x > 89.0f ? 89.0f : x;
  xc = xc < -104.0f ? -104.0f : xc;
  float k = __builtin_nearbyintf(xc * 1.44269504088896341f);
  float r = xc - k * 0.693359375f;
  r = r + k * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = (p * (r * r) + r) + 1.0f;
  int ki = (int)k;
  int k1 = ki >> 1;
  return y * fx_pow2i(k1) * fx_pow2i(ki - k1);
}
FX_INLINE double fx_expd(double x) { return std::exp(x); }
FX_INLINE float fx_sigmoidf(float x) { return 1.0f / (1.0f + fx_expf(-x)); }
FX_INLINE double fx_sigmoidd(double x) { return 1.0 / (1.0 + std::exp(-x)); }
// tanh(x) = sign(x) * (1 - e) / (1 + e), e = exp(-2|x|): no overflow, vectorizable;
// small |x| uses the odd Taylor series, where the quotient would cancel.
FX_INLINE float fx_tanhf(float x) {
  float ax = x < 0 ? -x : x;
  float e = fx_expf(-2.0f * ax);
  float t = (1.0f - e) / (1.0f + e);
  float x2 = x * x;
  float small = ax * (1.0f + x2 * (-0.333333333f + x2 * (0.133333333f + x2 * -0.0539682540f)));
  t = ax < 0.0625f ? small : t;
  t = x < 0 ? -t : t;
  return t;  // a NaN has propagated through every step
}
// erf for float, vectorizable: Abramowitz and Stegun 7.1.26 (absolute error below
// 1.5e-7, the same approximation ATen's vectorized erf uses).
FX_INLINE float fx_erff(float x) {
  float ax = x < 0 ? -x : x;
  float t = 1.0f / (1.0f + 0.3275911f * ax);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  float r = 1.0f - p * t * fx_expf(-ax * ax);
  r = x < 0 ? -r : r;
  return r;  // a NaN has propagated through every step
}

// NaN-propagating minimum and maximum (torch.minimum/maximum, clamp). `c < a ? c : a`
// is exactly one min instruction that returns `a` when either is NaN; the *_c forms
// take a constant that is not NaN, so they need no further check.
template <typename T> FX_INLINE T fx_minc(T a, T c) { return c < a ? c : a; }
template <typename T> FX_INLINE T fx_maxc(T a, T c) { return c > a ? c : a; }
template <typename T> FX_INLINE T fx_min(T a, T b) { return b != b ? b : fx_minc(a, b); }
template <typename T> FX_INLINE T fx_max(T a, T b) { return b != b ? b : fx_maxc(a, b); }

// Integer division never traps: a zero divisor sets the error flag (the runtime then
// raises ZeroDivisionError like eager) and INT_MIN / -1 wraps.
template <typename T> FX_INLINE T fx_idiv(T a, T b, int32_t* err) {
  if (b == 0) { *err = 1; return 0; }
  if (b == -1) return (T)(0 - (uint64_t)a);
  return (T)(a / b);
}
template <typename T> FX_INLINE T fx_imod(T a, T b, int32_t* err) {
  if (b == 0) { *err = 1; return 0; }
  if (b == -1) return 0;
  return (T)(a % b);
}
template <typename T> FX_INLINE T fx_ifloordiv(T a, T b, int32_t* err) {
  T q = fx_idiv(a, b, err);
  T r = (T)(a - q * b);
  return (r != 0 && ((r < 0) != (b < 0))) ? (T)(q - 1) : q;
}
template <typename T> FX_INLINE T fx_iremainder(T a, T b, int32_t* err) {
  T r = fx_imod(a, b, err);
  return (r != 0 && ((r < 0) != (b < 0))) ? (T)(r + b) : r;
}
template <typename T> FX_INLINE T fx_fremainder(T a, T b) {
  T r = std::fmod(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
template <typename T> FX_INLINE T fx_ffloordiv(T a, T b) {
  if (b == 0) return a / b;
  T mod = std::fmod(a, b);
  T div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
  T fl;
  if (div != 0) {
    fl = std::floor(div);
    if (div - fl > T(0.5)) fl += 1;
  } else {
    fl = std::copysign(T(0), a / b);
  }
  return fl;
}
template <typename T> FX_INLINE T fx_ipow(T base, T exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exp & 1) ? -1 : 1;
    return 0;
  }
  T result = 1;
  while (exp) {
    if (exp & 1) result = (T)(result * base);
    exp = (T)(exp >> 1);
    base = (T)(base * base);
  }
  return result;
}
template <typename T> FX_INLINE T fx_fsign(T x) { return (T)((T(0) < x) - (x < T(0))); }
)FUSER";

}  // namespace fuser::codegen
