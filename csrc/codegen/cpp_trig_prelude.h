// sin, cos and tan for the generated C++ kernels, vectorizable, correctly rounded as
// cpp_vector_math.h's functions are. Printed only into kernels that call one (the table
// is 106 rows). tools/two_over_pi_table.py prints the table.
#pragma once

#include "codegen/kernel_ir.h"

namespace fuser::codegen {

inline const char* kCppTrigPrelude = R"FUSER(
// sin, cos and tan for float x, vectorizable. |x| = (4n + q) pi/2 + r with |r| <= pi/4
// (a little more above 2^24), computed in double: below 2^24 by pi/2 in three parts
// (Cody and Waite; every product exact), above it from x's 24-bit integer significand M
// and 2/pi's bits from x's exponent on (Payne and Hanek): fx_two_over_pi's row E holds
// (2^E * 2/pi) mod 4 to 2^-102.
static const double fx_two_over_pi[106 * 2] = {
    0x1.45f306dc9c880p-1, 0x1.529fc2757d1f4p-52,
    0x1.45f306dc9c880p+0, 0x1.529fc2757d1f4p-51,
    0x1.45f306dc9c882p+1, 0x1.4a7f09d5f47d4p-52,
    0x1.17cc1b7272208p+0, 0x1.4a7f09d5f47d4p-51,
    0x1.17cc1b727220ap+1, 0x1.29fc2757d1f50p-52,
    0x1.7cc1b727220a0p-2, 0x1.29fc2757d1f52p-51,
    0x1.7cc1b727220a8p-1, 0x1.4fe13abe8fa98p-53,
    0x1.7cc1b727220a8p+0, 0x1.4fe13abe8fa98p-52,
    0x1.7cc1b727220a8p+1, 0x1.4fe13abe8fa9ap-51,
    0x1.f306dc9c882a4p+0, 0x1.3f84eafa3ea68p-52,
    0x1.f306dc9c882a4p+1, 0x1.3f84eafa3ea68p-51,
    0x1.e60db9391054ap+1, 0x1.fc2757d1f5348p-53,
    0x1.cc1b727220a94p+1, 0x1.fc2757d1f534cp-52,
    0x1.9836e4e441528p+1, 0x1.fc2757d1f534cp-51,
    0x1.306dc9c882a52p+1, 0x1.f84eafa3ea69ap-51,
    0x1.836e4e4415298p-1, 0x1.f09d5f47d4d36p-51,
    0x1.836e4e441529cp+0, 0x1.e13abe8fa9a6ep-51,
    0x1.836e4e441529ep+1, 0x1.c2757d1f534dcp-51,
    0x1.06dc9c882a53ep+1, 0x1.84eafa3ea69bap-51,
    0x1.b727220a94fc0p-4, 0x1.09d5f47d4d376p-51,
    0x1.b727220a94fe0p-3, 0x1.3abe8fa9a6ee0p-55,
    0x1.b727220a94fe0p-2, 0x1.3abe8fa9a6ee0p-54,
    0x1.b727220a94fe0p-1, 0x1.3abe8fa9a6ee0p-53,
    0x1.b727220a94fe0p+0, 0x1.3abe8fa9a6ee0p-52,
    0x1.b727220a94fe0p+1, 0x1.3abe8fa9a6ee0p-51,
    0x1.6e4e441529fc2p+1, 0x1.d5f47d4d37700p-53,
    0x1.b9391054a7f08p+0, 0x1.d5f47d4d37700p-52,
    0x1.b9391054a7f08p+1, 0x1.d5f47d4d37702p-51,
    0x1.727220a94fe12p+1, 0x1.abe8fa9a6ee06p-51,
    0x1.c9c882a53f84cp+0, 0x1.57d1f534ddc0cp-51,
    0x1.c9c882a53f84ep+1, 0x1.5f47d4d377034p-52,
    0x1.9391054a7f09cp+1, 0x1.5f47d4d377036p-51,
    0x1.27220a94fe13ap+1, 0x1.7d1f534ddc0d8p-52,
    0x1.391054a7f09d0p-1, 0x1.7d1f534ddc0dap-51,
    0x1.391054a7f09d4p+0, 0x1.f47d4d377036cp-52,
    0x1.391054a7f09d4p+1, 0x1.f47d4d377036cp-51,
    0x1.c882a53f84ea8p-1, 0x1.e8fa9a6ee06dap-51,
    0x1.c882a53f84eacp+0, 0x1.d1f534ddc0db6p-51,
    0x1.c882a53f84eaep+1, 0x1.a3ea69bb81b6cp-51,
    0x1.91054a7f09d5ep+1, 0x1.47d4d377036d8p-51,
    0x1.220a94fe13abep+1, 0x1.1f534ddc0db60p-52,
    0x1.1054a7f09d5f0p-1, 0x1.1f534ddc0db62p-51,
    0x1.1054a7f09d5f4p+0, 0x1.f534ddc0db620p-54,
    0x1.1054a7f09d5f4p+1, 0x1.f534ddc0db628p-53,
    0x1.054a7f09d5f40p-2, 0x1.f534ddc0db628p-52,
    0x1.054a7f09d5f40p-1, 0x1.f534ddc0db628p-51,
    0x1.054a7f09d5f44p+0, 0x1.ea69bb81b6c52p-51,
    0x1.054a7f09d5f46p+1, 0x1.d4d377036d8a4p-51,
    0x1.529fc2757d1c0p-4, 0x1.a9a6ee06db14ap-51,
    0x1.529fc2757d1e0p-3, 0x1.534ddc0db6294p-51,
    0x1.529fc2757d1f0p-2, 0x1.4d377036d8a54p-52,
    0x1.529fc2757d1f0p-1, 0x1.4d377036d8a56p-51,
    0x1.529fc2757d1f4p+0, 0x1.34ddc0db62958p-52,
    0x1.529fc2757d1f4p+1, 0x1.34ddc0db62958p-51,
    0x1.4a7f09d5f47d4p+0, 0x1.a6ee06db14ac8p-53,
    0x1.4a7f09d5f47d4p+1, 0x1.a6ee06db14accp-52,
    0x1.29fc2757d1f50p+0, 0x1.a6ee06db14accp-51,
    0x1.29fc2757d1f52p+1, 0x1.4ddc0db629598p-51,
    0x1.4fe13abe8fa98p-1, 0x1.377036d8a5664p-52,
    0x1.4fe13abe8fa98p+0, 0x1.377036d8a5664p-51,
    0x1.4fe13abe8fa9ap+1, 0x1.bb81b6c52b320p-53,
    0x1.3f84eafa3ea68p+0, 0x1.bb81b6c52b324p-52,
    0x1.3f84eafa3ea68p+1, 0x1.bb81b6c52b326p-51,
    0x1.fc2757d1f5348p-1, 0x1.77036d8a5664ep-51,
    0x1.fc2757d1f534cp+0, 0x1.dc0db6295993cp-52,
    0x1.fc2757d1f534cp+1, 0x1.dc0db6295993cp-51,
    0x1.f84eafa3ea69ap+1, 0x1.b81b6c52b3278p-51,
    0x1.f09d5f47d4d36p+1, 0x1.7036d8a5664f0p-51,
    0x1.e13abe8fa9a6ep+1, 0x1.c0db6295993c4p-52,
    0x1.c2757d1f534dcp+1, 0x1.c0db6295993c4p-51,
    0x1.84eafa3ea69bap+1, 0x1.81b6c52b32788p-51,
    0x1.09d5f47d4d376p+1, 0x1.036d8a5664f10p-51,
    0x1.3abe8fa9a6ee0p-3, 0x1.b6c52b3278800p-57,
    0x1.3abe8fa9a6ee0p-2, 0x1.b6c52b3278840p-56,
    0x1.3abe8fa9a6ee0p-1, 0x1.b6c52b3278860p-55,
    0x1.3abe8fa9a6ee0p+0, 0x1.b6c52b3278870p-54,
    0x1.3abe8fa9a6ee0p+1, 0x1.b6c52b3278870p-53,
    0x1.d5f47d4d37700p-1, 0x1.b6c52b3278870p-52,
    0x1.d5f47d4d37700p+0, 0x1.b6c52b3278872p-51,
    0x1.d5f47d4d37702p+1, 0x1.6d8a5664f10e4p-51,
    0x1.abe8fa9a6ee06p+1, 0x1.b6295993c4390p-52,
    0x1.57d1f534ddc0cp+1, 0x1.b6295993c4390p-51,
    0x1.5f47d4d377034p+0, 0x1.6c52b32788720p-51,
    0x1.5f47d4d377036p+1, 0x1.b14acc9e21c80p-52,
    0x1.7d1f534ddc0d8p+0, 0x1.b14acc9e21c82p-51,
    0x1.7d1f534ddc0dap+1, 0x1.6295993c43904p-51,
    0x1.f47d4d377036cp+0, 0x1.8a5664f10e410p-52,
    0x1.f47d4d377036cp+1, 0x1.8a5664f10e410p-51,
    0x1.e8fa9a6ee06dap+1, 0x1.14acc9e21c820p-51,
    0x1.d1f534ddc0db6p+1, 0x1.4acc9e21c8200p-54,
    0x1.a3ea69bb81b6cp+1, 0x1.4acc9e21c8208p-53,
    0x1.47d4d377036d8p+1, 0x1.4acc9e21c820cp-52,
    0x1.1f534ddc0db60p+0, 0x1.4acc9e21c820ep-51,
    0x1.1f534ddc0db62p+1, 0x1.2b3278872083cp-52,
    0x1.f534ddc0db620p-2, 0x1.2b3278872083ep-51,
    0x1.f534ddc0db628p-1, 0x1.5993c439041f8p-53,
    0x1.f534ddc0db628p+0, 0x1.5993c439041fcp-52,
    0x1.f534ddc0db628p+1, 0x1.5993c439041fep-51,
    0x1.ea69bb81b6c52p+1, 0x1.664f10e4107f8p-52,
    0x1.d4d377036d8a4p+1, 0x1.664f10e4107f8p-51,
    0x1.a9a6ee06db14ap+1, 0x1.993c439041fe4p-52,
    0x1.534ddc0db6294p+1, 0x1.993c439041fe4p-51,
    0x1.4d377036d8a54p+0, 0x1.3278872083fcap-51,
    0x1.4d377036d8a56p+1, 0x1.93c439041fe50p-53,
    0x1.34ddc0db62958p+0, 0x1.93c439041fe50p-52,
    0x1.34ddc0db62958p+1, 0x1.93c439041fe50p-51,
};
struct FxQuadrant { double r; int q; };
FX_INLINE FxQuadrant fx_reduce_quadrant(float ax) {
  const double xd = ax;
  const double k = __builtin_nearbyint(xd * 0x1.45f306dc9c883p-1);  // 2/pi
  const double r_small =
      ((xd - k * 0x1.921fb54p+0) - k * 0x1.10b461p-30) - k * 0x1.a62633145c06ep-58;
  const uint32_t bits = __builtin_bit_cast(uint32_t, ax);
  const int32_t e = (int32_t)(bits >> 23) - 150;
  const int32_t row = e < 0 ? 0 : e;
  const double m = (double)(int32_t)((bits & 0x7fffffu) | 0x800000u);
  // Row E: parts 0 + 1, parts 2 + 3. Part 0 is the first sum rounded to 2^-24, so part
  // 1 may be negative; M times either is exact, and so are the sums up to t's below.
  // The last two parts' product rounds, 2^-79 at most. Indexed, not through a pointer:
  // GCC vectorizes loads from an array only. A 64-bit index: where GCC's tuning turns
  // gather instructions off (-mtune=generic on CPUs it does not know), it loads the
  // lanes one by one only from an index as wide as the double.
  const int64_t at = 2 * (int64_t)row;
  const double head = fx_two_over_pi[at];
  const double part0 = (head + 0x1.8p28) - 0x1.8p28;
  double t = m * part0;
  t = t - 4.0 * __builtin_floor(t * 0.25);
  t = t + m * (head - part0);
  const double qd = __builtin_nearbyint(t);
  const double f = (t - qd) + m * fx_two_over_pi[at + 1];
  const bool large = e >= 1;
  FxQuadrant out;
  out.r = large ? f * 0x1.921fb54442d18p+0 : r_small;
  out.q = (int32_t)(large ? qd : k) & 3;
  return out;
}
FX_INLINE double fx_sin_poly(double r) {
  const double z = r * r;
  double p = 1.0 / 6227020800;
  p = p * z - 1.0 / 39916800;
  p = p * z + 1.0 / 362880;
  p = p * z - 1.0 / 5040;
  p = p * z + 1.0 / 120;
  p = p * z - 1.0 / 6;
  return r + r * z * p;
}
FX_INLINE double fx_cos_poly(double r) {
  const double z = r * r;
  double p = -1.0 / 87178291200;
  p = p * z + 1.0 / 479001600;
  p = p * z - 1.0 / 3628800;
  p = p * z + 1.0 / 40320;
  p = p * z - 1.0 / 720;
  p = p * z + 1.0 / 24;
  p = p * z - 0.5;
  return 1.0 + z * p;
}
// Infinities and NaN give NaN (x - x). They are reduced as well (row 105 is theirs) and
// the result discarded: with a constant stand-in GCC reduced finite lanes only, through
// masked table loads it cannot vectorize.
FX_INLINE bool fx_trig_finite(float x) { return __builtin_fabsf(x) < __builtin_inff(); }
FX_INLINE float fx_sign_of(float x, double v) {
  const uint32_t sign = __builtin_bit_cast(uint32_t, x) & 0x80000000u;
  return __builtin_bit_cast(float, __builtin_bit_cast(uint32_t, (float)v) ^ sign);
}
FX_INLINE float fx_sinf(float x) {
  const bool finite = fx_trig_finite(x);
  const FxQuadrant a = fx_reduce_quadrant(__builtin_fabsf(x));
  const double s = fx_sin_poly(a.r), c = fx_cos_poly(a.r);
  double v = (a.q & 1) ? c : s;
  v = (a.q & 2) ? -v : v;
  return finite ? fx_sign_of(x, v) : x - x;
}
FX_INLINE float fx_cosf(float x) {
  const bool finite = fx_trig_finite(x);
  const FxQuadrant a = fx_reduce_quadrant(__builtin_fabsf(x));
  const double s = fx_sin_poly(a.r), c = fx_cos_poly(a.r);
  double v = (a.q & 1) ? s : c;
  v = ((a.q + 1) & 2) ? -v : v;
  return finite ? (float)v : x - x;
}
FX_INLINE float fx_tanf(float x) {
  const bool finite = fx_trig_finite(x);
  const FxQuadrant a = fx_reduce_quadrant(__builtin_fabsf(x));
  const double s = fx_sin_poly(a.r), c = fx_cos_poly(a.r);
  const double v = (a.q & 1) ? -c / s : s / c;
  return finite ? fx_sign_of(x, v) : x - x;
}
)FUSER";

inline const char* trigPreludeFor(const Kernel& k) {
  return callsTrigonometry(k) ? kCppTrigPrelude : "";
}

}  // namespace fuser::codegen
