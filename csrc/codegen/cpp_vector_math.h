// Vectorizable float log, log2, log10, log1p, expm1, pow, fmod, atan, asin, acos, atan2,
// sinh and cosh for the generated C++ kernels. libm's are scalar calls, so a loop calling
// one ran element by element, 2-13x slower than eager's Sleef kernels on 2^20 floats.
// These widen to double, where the reductions and series are exact enough that the float
// result is correctly rounded but where the exact value lies within about 1e-13
// (relative) of a midpoint between floats (log, log2, expm1: no such float found among
// all 2^32; atan, asin, acos, sinh, cosh: none in a 1/16 sample; fmod is exact;
// test_vector_math.py checks samples), and use only operations AVX2 vectorizes (no int64
// conversions).
#pragma once

namespace fuser::codegen {

inline const char* kCppVectorMath = R"FUSER(
FX_INLINE double fx_d_from_bits(uint64_t u) { return __builtin_bit_cast(double, u); }
FX_INLINE uint64_t fx_bits_of(double d) { return __builtin_bit_cast(uint64_t, d); }
// log of a positive, finite, normal double to about 1e-13 (relative): v = 2^e * m with m
// in [sqrt(1/2), sqrt(2)), log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.1716,
// by atanh's series to s^17. Integer and double operations only, so float kernels that
// widen to it vectorize; rounded to float the result is correctly rounded but for
// values within about 1e-13 of a midpoint.
FX_INLINE double fx_log_pos(double v) {
  const uint64_t u = fx_bits_of(v);
  const int64_t e = (int64_t)(u - 0x3fe6a09e667f3bcdull) >> 52;  // sqrt(1/2)'s bits
  const double m = fx_d_from_bits(u - ((uint64_t)e << 52));
  // e as a double without an int64 conversion (AVX2 has none): 1.5 * 2^52 + e.
  const double ed = fx_d_from_bits(0x4338000000000000ull + (uint64_t)e) - 0x1.8p52;
  const double s = (m - 1.0) / (m + 1.0);
  const double z = s * s;
  double p = 2.0 / 17;
  p = p * z + 2.0 / 15;
  p = p * z + 2.0 / 13;
  p = p * z + 2.0 / 11;
  p = p * z + 2.0 / 9;
  p = p * z + 2.0 / 7;
  p = p * z + 2.0 / 5;
  p = p * z + 2.0 / 3;
  return ed * 0x1.62e42fefa39efp-1 + (2.0 * s + s * z * p);
}
// log's value at u <= 0, +inf and NaN without a select (GCC 13 leaves a loop with a
// chain of selects on one variable as branches, which it does not vectorize): u + sqrt(u)
// is inf at inf, NaN below 0 and at NaN, and 1 / u^2 turns 0 (either sign) into -inf.
FX_INLINE float fx_log_of_non_positive(float u) {
  return u + __builtin_sqrtf(u) - 1.0f / (u * u);
}
FX_INLINE double fx_logf_wide(float x) {
  const bool ordinary = (x > 0.0f) & (x < __builtin_inff());
  const double r = fx_log_pos(ordinary ? (double)x : 1.0);
  return ordinary ? r : (double)fx_log_of_non_positive(x);
}
FX_INLINE float fx_logf(float x) { return (float)fx_logf_wide(x); }
FX_INLINE float fx_log2f(float x) { return (float)(fx_logf_wide(x) * 0x1.71547652b82fep0); }
FX_INLINE float fx_log10f(float x) { return (float)(fx_logf_wide(x) * 0x1.bcb7b1526e50ep-2); }
// log1p: for |x| >= 2^-29, 1 + x is exact in double (x's last bit is at 2^-52 or above;
// past 2^53 the lost 1 is below log's precision), so log1p(x) = log(1 + x); below,
// x - x^2 / 2 (the next term is below double's precision).
FX_INLINE float fx_log1pf(float x) {
  const double xd = x;
  const bool ordinary = (x > -1.0f) & (x < __builtin_inff());
  double r = fx_log_pos(ordinary ? 1.0 + xd : 2.0);
  r = __builtin_fabsf(x) < 0x1p-29f ? xd - 0.5 * xd * xd : r;
  // 1 + x in float is exact where it matters here: 0 at -1, below 0 below it.
  return ordinary ? (float)r : fx_log_of_non_positive(1.0f + x);
}
// e^r and 2^k for the double forms below: t = k ln2 + r, |r| <= ln2 / 2, e^r - 1 by
// Taylor to r^12 (1e-15). k comes back as a double; 2^k through its bits, for k within
// double's exponent range (callers clamp t).
FX_INLINE double fx_exp_d_minus_one(double t, double* k_out) {
  const double k = __builtin_nearbyint(t * 0x1.71547652b82fep0);
  const double r = (t - k * 0x1.62e42fefa3800p-1) - k * 0x1.ef35793c7673p-45;
  double p = 1.0 / 479001600;
  p = p * r + 1.0 / 39916800;
  p = p * r + 1.0 / 3628800;
  p = p * r + 1.0 / 362880;
  p = p * r + 1.0 / 40320;
  p = p * r + 1.0 / 5040;
  p = p * r + 1.0 / 720;
  p = p * r + 1.0 / 120;
  p = p * r + 1.0 / 24;
  p = p * r + 1.0 / 6;
  p = p * r + 0.5;
  *k_out = k;
  return r + r * r * p;
}
FX_INLINE double fx_pow2_d(double k) {  // k is integral: 1.5 * 2^52 + k holds it exactly
  const uint64_t kb = fx_bits_of(k + 0x1.8p52) - 0x4338000000000000ull;
  return fx_d_from_bits((kb + 1023) << 52);
}
// exp(x) - 1 for float x: 2^k * (e^r - 1) + (2^k - 1) keeps small results exact where
// k = 0. x is clamped to [-110, 100] (past float's range either way; NaN passes).
FX_INLINE float fx_expm1f(float x) {
  double xd = x;
  xd = xd > 100.0 ? 100.0 : xd;
  xd = xd < -110.0 ? -110.0 : xd;
  double k;
  const double em1 = fx_exp_d_minus_one(xd, &k);
  const double two_k = fx_pow2_d(k);
  const double y = two_k * em1 + (two_k - 1.0);
  // expm1 keeps x's sign: -0 gives -0 (the sum above gives +0); NaN stays NaN.
  return __builtin_copysignf((float)y, x);
}
// x^y for floats: exp(y log|x|) in double, whose error (1e-11 at most where the result
// is a float) leaves the float result one step off at most, rarely (6 of 20 million
// random pairs), and C99's special cases, as eager's vectorized pow gives them:
// y = 0 or x = 1 give 1 even with a NaN; a negative x takes an integral y only (odd: the
// result negative); zeros and infinities by y's sign; y = +-inf by |x| against 1.
FX_INLINE float fx_powf(float x, float y) {
  const float inf = __builtin_inff();
  const float ax = __builtin_fabsf(x), ay = __builtin_fabsf(y);
  const bool ordinary = (ax > 0.0f) & (ax < inf);
  double t = (double)y * fx_log_pos(ordinary ? (double)ax : 1.0);
  t = t > 200.0 ? 200.0 : t;
  t = t < -200.0 ? -200.0 : t;  // NaN passes both
  double k;
  const double em1 = fx_exp_d_minus_one(t, &k);
  const double two_k = fx_pow2_d(k);
  float mag = (float)(two_k * em1 + two_k);
  const bool integral = y == __builtin_floorf(y);
  // Odd integers by float arithmetic alone: for integral y the difference is exact, and 0
  // from 2^24 on, where every float is even. No conversion to int and no && or || here:
  // either can keep GCC from vectorizing a caller's loop (the latter's branches become
  // selects between masks).
  const bool odd = integral & (y - 2.0f * __builtin_floorf(0.5f * y) == 1.0f);
  mag = ax == 0.0f ? (y < 0.0f ? inf : 0.0f) : mag;
  mag = ax == inf ? (y < 0.0f ? 0.0f : inf) : mag;
  float r = __builtin_copysignf(mag, odd ? x : 1.0f);  // x's sign: -0 too
  r = (x < 0.0f) & (ax < inf) & !integral & (ay < inf) ? __builtin_nanf("") : r;
  // y = +-inf: inf where |x| - 1 and y share a sign, else 0.
  r = ay == inf ? (ax == 1.0f ? 1.0f : ((ax - 1.0f) * y > 0.0f ? inf : 0.0f)) : r;
  r = (x != x) | (y != y) ? x + y : r;
  return (y == 0.0f) | (x == 1.0f) ? 1.0f : r;
}
// fmod for floats, exact as libm's is and vectorizable (fmodf is a scalar call: a fused
// floor_divide ran 8x slower than eager). In double, r = |a| loses q |b| per step, q the
// truncated quotient cut to its top 29 bits: q |b| is exact (29 + 24 bits), and so is the
// difference, which has at most 26 significant bits. Each step shrinks r by at least 2^28
// until the quotient fits 29 bits; the quotient of two floats is below 2^278, so ten
// steps end with r within 2^-22 |b| of [0, |b|), put there by one add or subtract.
FX_INLINE float fx_fmodf(float a, float b) {
  const float inf = __builtin_inff();
  const float aa = __builtin_fabsf(a), ab = __builtin_fabsf(b);
  const bool ordinary = (aa < inf) & (ab > 0.0f) & (ab < inf);
  const double d = ordinary ? (double)ab : 1.0;
  const double inv = 1.0 / d;
  double r = ordinary ? (double)aa : 0.0;
  for (int step = 0; step < 10; ++step) {
    const double q = __builtin_trunc(r * inv);
    r = r - fx_d_from_bits(fx_bits_of(q) & ~0xffffffull) * d;
  }
  r = r < 0.0 ? r + d : r;
  r = r >= d ? r - d : r;
  const float result = __builtin_copysignf((float)r, a);
  // b = +-inf leaves a finite a as it is; NaNs, an infinite a and b = 0 give NaN.
  const float special = (ab == inf) & (aa < inf) ? a : __builtin_nanf("");
  return ordinary ? result : special;
}
FX_INLINE float fx_fmod(float a, float b) { return fx_fmodf(a, b); }
// atan of a double t >= 0 (+inf included) to about 1e-15, as n / d: past 1, atan t =
// pi/2 - atan(1/t); then past tan(pi/12), atan u = pi/6 + atan v by the arctangent
// addition rule, v = (u sqrt3 - 1) / (u + sqrt3), so |v| <= tan(pi/12) and atan's
// series to v^23 converges to double's precision. One division, and only two-way
// selects: GCC 13 kept a three-deep chain of selects here as branches, leaving a loop
// that also called log scalar.
FX_INLINE double fx_atan_nonneg(double t) {
  const double root3 = 0x1.bb67ae8584caap0;
  const bool past1 = t > 1.0;
  const double n = past1 ? 1.0 : t, d = past1 ? t : 1.0;
  const bool past_pi_12 = n > 0x1.126145e9ecd56p-2 * d;
  const double num = past_pi_12 ? n * root3 - d : n;
  const double den = past_pi_12 ? n + d * root3 : d;
  const double v = num / den;
  const double z = v * v;
  double p = -1.0 / 23;
  p = p * z + 1.0 / 21;
  p = p * z - 1.0 / 19;
  p = p * z + 1.0 / 17;
  p = p * z - 1.0 / 15;
  p = p * z + 1.0 / 13;
  p = p * z - 1.0 / 11;
  p = p * z + 1.0 / 9;
  p = p * z - 1.0 / 7;
  p = p * z + 1.0 / 5;
  p = p * z - 1.0 / 3;
  double a = v + v * z * p;
  a = past_pi_12 ? 0x1.0c152382d7365p-1 + a : a;  // pi/6
  return past1 ? 0x1.921fb54442d18p0 - a : a;     // pi/2
}
// Inverse trigonometric functions of floats through fx_atan_nonneg; their arguments are
// exact or within 1e-16 in double. x's sign is put back by copysign, so -0 stays -0 and
// a NaN stays NaN.
FX_INLINE float fx_atanf(float x) {
  return __builtin_copysignf((float)fx_atan_nonneg(__builtin_fabs((double)x)), x);
}
// asin x = atan(|x| / sqrt((1 - x)(1 + x))): |x| = 1 gives atan(inf), |x| > 1 a NaN.
FX_INLINE float fx_asinf(float x) {
  const double ax = __builtin_fabs((double)x);
  const double t = ax / __builtin_sqrt((1.0 - ax) * (1.0 + ax));
  return __builtin_copysignf((float)fx_atan_nonneg(t), x);
}
// acos x = 2 atan(sqrt((1 - x) / (1 + x))), with no cancellation near either end.
FX_INLINE float fx_acosf(float x) {
  const double xd = x;
  return (float)(2.0 * fx_atan_nonneg(__builtin_sqrt((1.0 - xd) / (1.0 + xd))));
}
// atan2(y, x) = atan(|y| / |x|), reflected to pi minus it where x's sign bit is set, with
// y's sign. Both zero read as 0 / 1 and both infinite as 1 / 1, which give C99's values
// (+-0 or +-pi; +-pi/4 or +-3pi/4).
FX_INLINE float fx_atan2f(float y, float x) {
  const double ay = __builtin_fabs((double)y), ax = __builtin_fabs((double)x);
  const bool both_zero = (ay == 0.0) & (ax == 0.0);
  const bool both_inf = (ay == __builtin_inf()) & (ax == __builtin_inf());
  const double num = both_inf ? 1.0 : ay;
  const double den = both_inf | both_zero ? 1.0 : ax;
  const double a = fx_atan_nonneg(num / den);
  const double r = __builtin_copysign(1.0, (double)x) < 0.0 ? 0x1.921fb54442d18p1 - a : a;
  return __builtin_copysignf((float)r, y);
}
// sinh and cosh from E = e^|x| - 1 in double (fx_exp_d_minus_one, exact for small |x|
// where e^|x| - e^-|x| would cancel): sinh = (E + E / (E + 1)) / 2, cosh = (E + 1 +
// 1 / (E + 1)) / 2. |x| is clamped to 100, past float's range (NaN passes the clamp).
FX_INLINE double fx_exp_abs_minus_one(float x) {
  double ax = __builtin_fabs((double)x);
  ax = ax > 100.0 ? 100.0 : ax;
  double k;
  const double em1 = fx_exp_d_minus_one(ax, &k);
  const double two_k = fx_pow2_d(k);
  return two_k * em1 + (two_k - 1.0);
}
FX_INLINE float fx_sinhf(float x) {
  const double e = fx_exp_abs_minus_one(x);
  return __builtin_copysignf((float)(0.5 * (e + e / (e + 1.0))), x);
}
FX_INLINE float fx_coshf(float x) {
  const double e1 = fx_exp_abs_minus_one(x) + 1.0;
  return (float)(0.5 * (e1 + 1.0 / e1));
}
)FUSER";

}  // namespace fuser::codegen
