// exp(x) for x <= 0 in plain float arithmetic, so that loops over it vectorize (std::exp is a
// library call per value). The AFT-full prefill takes one per weight and per merge of two states,
// always of a value minus a maximum.
#pragma once

#include <cstdint>
#include <cstring>

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

}  // namespace aft
