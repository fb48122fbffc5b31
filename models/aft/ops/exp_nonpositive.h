// exp(x) for x <= 0 in plain arithmetic, so that loops over it vectorize (std::exp is a library
// call per value). The AFT-full prefill takes one (float) per weight, and every merge of two
// accumulator states one (double), always of a value minus a maximum.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

namespace aft {

// Within 2 ulp of exp(x) for -87.33 <= x <= 0 (exp(0) is exactly 1); 0 below, where exp(x) is
// under 2^-126 (subnormal), and for x = -inf. NaN stays NaN.
// x = n ln2 + r with |r| <= ln2 / 2 and exp(r) by its Taylor series up to r^7 (the rest is under
// 2^-27 of it), times 2^n built from its exponent bits.
inline float exp_nonpositive(float x) {
  constexpr float kMinArgument = -87.336544f;  // ln(2^-126)
  constexpr float kLog2e = 1.44269504f;
  constexpr float kLn2Hi = 0.693145751953125f;       // 16 significant bits: n * kLn2Hi is exact
  constexpr float kLn2Lo = 1.42860682030941723e-6f;  // ln2 - kLn2Hi
  constexpr float kRound = 12582912.0f;              // 1.5 * 2^23: adding it rounds to an integer
  // NaN is clamped too, so that the conversion to int below stays defined; the result keeps it.
  const float clamped = x > kMinArgument ? x : kMinArgument;
  const float n = (clamped * kLog2e + kRound) - kRound;
  const float r = (clamped - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;  // n in [-126, 0]: a normal 2^n
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return x >= kMinArgument ? p * scale : x < kMinArgument ? 0.0f : x;
}

// The same in double: within 2 ulp for -708.39 <= x <= 0, 0 below (under 2^-1022) and for -inf.
// Taylor series up to r^13 (the rest is under 2^-57 of it).
inline double exp_nonpositive(double x) {
  constexpr double kMinArgument = -708.39641853226408;  // ln(2^-1022)
  constexpr double kLog2e = 1.4426950408889634;
  constexpr double kLn2Hi = 6.93147180369123816490e-01;  // 32 significant bits: n * kLn2Hi is exact
  constexpr double kLn2Lo = 1.90821492927058770002e-10;  // ln2 - kLn2Hi
  constexpr double kRound = 6755399441055744.0;          // 1.5 * 2^52
  const double clamped = x > kMinArgument ? x : kMinArgument;
  const double n = (clamped * kLog2e + kRound) - kRound;
  const double r = (clamped - n * kLn2Hi) - n * kLn2Lo;
  double p = 1.0 / 6227020800;  // 1 / 13!, then Horner's rule down to 1 / 0!
  p = p * r + 1.0 / 479001600;
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
  p = p * r + 1.0;
  p = p * r + 1.0;
  // n + 1023 + 2^52 holds n + 1023 (in [1, 1023]) in its low mantissa bits; shifted by 52 they are
  // the exponent field of 2^n (no conversion to a 64-bit integer, which SSE2 lacks: the loops over
  // it vectorize).
  const double biased = n + (1023.0 + 4503599627370496.0);
  uint64_t bits;
  std::memcpy(&bits, &biased, sizeof(bits));
  bits <<= 52;
  double scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return x >= kMinArgument ? p * scale : x < kMinArgument ? 0.0 : x;
}

// A row of weights w[0, n) made exp(w - max) in place; returns max, the largest w (-inf if n is 0;
// NaN entries do not count, and stay NaN). The AFT-full prefill's and the AFT-local window's bias
// rows.
inline float exp_minus_max(float* w, std::size_t n) {
  float max = -std::numeric_limits<float>::infinity();
  for (std::size_t i = 0; i < n; ++i) max = std::max(max, w[i]);
  for (std::size_t i = 0; i < n; ++i) w[i] = exp_nonpositive(w[i] - max);
  return max;
}

}  // namespace aft
