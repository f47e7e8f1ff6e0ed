// Helpers shared by the C++ and CUDA kernels, appended to each dialect's prelude,
// which defines FX_INLINE and the fx_fmod / fx_floor / fx_copysign they use.
#pragma once

namespace fuser::codegen {

inline const char* kCommonPrelude = R"FUSER(
// NaN-propagating minimum and maximum; the *c forms take a constant that is not NaN.
template <typename T> FX_INLINE T fx_minc(T a, T c) { return c < a ? c : a; }
template <typename T> FX_INLINE T fx_maxc(T a, T c) { return c > a ? c : a; }
template <typename T> FX_INLINE T fx_min(T a, T b) { return b != b ? b : fx_minc(a, b); }
template <typename T> FX_INLINE T fx_max(T a, T b) { return b != b ? b : fx_maxc(a, b); }

#ifdef __CUDACC_RTC__
// Eager's CUDA kernels divide integers with the GPU's division, which never traps and
// gives its own results for a zero divisor; these are eager's formulas, so the results
// match bit for bit (T's arithmetic promotes as eager's does).
// The divisor goes through an empty asm: NVRTC must not use what it knows of its range
// (a bool divisor is 0 or 1, so `a / b` would fold to `a`, dividing by 0 being undefined).
FX_INLINE int fx_opaque(int x) { asm("mov.b32 %0, %0;" : "+r"(x)); return x; }
FX_INLINE long fx_opaque(long x) { asm("mov.b64 %0, %0;" : "+l"(x)); return x; }
FX_INLINE long long fx_opaque(long long x) { asm("mov.b64 %0, %0;" : "+l"(x)); return x; }
template <typename T> FX_INLINE T fx_idiv(T a, T b, int32_t*) { return (T)(a / fx_opaque(+b)); }
template <typename T> FX_INLINE T fx_imod(T a, T b, int32_t*) { return (T)(a % fx_opaque(+b)); }
template <typename T> FX_INLINE T fx_ifloordiv(T a, T b, int32_t*) {
  if ((a < 0) != (b < 0)) {
    T q = (T)(a / fx_opaque(+b));
    T r = (T)(a % fx_opaque(+b));
    return r ? (T)(q - 1) : q;
  }
  return (T)(a / fx_opaque(+b));
}
template <typename T> FX_INLINE T fx_iremainder(T a, T b, int32_t*) {
  T r = (T)(a % fx_opaque(+b));
  return (r != 0 && ((r < 0) != (b < 0))) ? (T)(r + b) : r;
}
#else
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
#endif
// Eager's floating remainder and floor division, written as selects (no && and no
// branches) so that GCC vectorizes a loop calling them. "r is nonzero and its sign is not
// b's" is copysign(r, b) != r (false for zeros, true for NaN, which stays NaN); as sign
// comparisons, GCC 12 shared b < 0 with pow's y < 0 in one loop and then vectorized
// neither, and a product r * b underflows in double.
template <typename T> FX_INLINE T fx_fremainder(T a, T b) {
  T r = fx_fmod(a, b);
  return fx_copysign(r, b) != r ? r + b : r;
}
template <typename T> FX_INLINE T fx_ffloordiv(T a, T b) {
  T mod = fx_fmod(a, b);
  T div = (a - mod) / b;
  div = fx_copysign(mod, b) != mod ? div - 1 : div;
  T fl = fx_floor(div);
  fl = div - fl > T(0.5) ? fl + 1 : fl;
  fl = div == 0 ? fx_copysign(T(0), a / b) : fl;
  return b == 0 ? a / b : fl;
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
