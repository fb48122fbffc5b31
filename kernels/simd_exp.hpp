// exp(x) for x <= 0 on SIMD lanes, float64 and float32: the AFT accumulator's rescales and
// weights and its read-out, always a value minus a maximum. xsimd 8.1's double exp converts through
// 64-bit integers, which SSE2 and AVX2 lack: measured, the accumulator ran 7 (AVX2) to 15 (SSE2)
// times slower with it than with this (models/aft/ops/exp_nonpositive.h is the same function for
// one value).
#pragma once

#include <cstdint>

#include <xsimd/xsimd.hpp>

namespace aft::kernels::simd {

// Within 2 ulp for -708.39 <= x <= 0; 0 below (under 2^-1022) and for -inf; NaN stays NaN.
// x = n ln2 + r with |r| <= ln2 / 2, exp(r) by its Taylor series up to r^13 (the rest is under
// 2^-57 of it), times 2^n built in the exponent bits.
// Always inlined: as a call, every caller spilled its vector registers around it (the
// accumulator ran at a third of its speed).
template <class A>
__attribute__((always_inline)) inline xsimd::batch<double, A> exp_nonpositive(
    const xsimd::batch<double, A>& x) {
  using D = xsimd::batch<double, A>;
  using I = xsimd::batch<int64_t, A>;
  const D lowest(-708.39641853226408);  // ln(2^-1022)
  const D round(6755399441055744.0);    // 1.5 * 2^52: adding it rounds to an integer
  const D clamped = xsimd::max(x, lowest);
  const D n = xsimd::fma(clamped, D(1.4426950408889634), round) - round;
  // 32 significant bits in ln2's high part: n * high is exact.
  const D r = xsimd::fnma(n, D(1.90821492927058770002e-10),
                          xsimd::fnma(n, D(6.93147180369123816490e-01), clamped));
  // Estrin's scheme: four multiply-add levels deep instead of Horner's thirteen (the lanes of a
  // kernel wait on it).
  const D r2 = r * r;
  const D r4 = r2 * r2;
  const D r8 = r4 * r4;
  // c0 + c1 r, and the terms of 1 / k! in pairs, then fours, then eights.
  const auto pair = [&](double c0, double c1) { return xsimd::fma(r, D(c1), D(c0)); };
  const D s0 = xsimd::fma(r2, pair(1.0 / 2, 1.0 / 6), pair(1.0, 1.0));
  const D s1 = xsimd::fma(r2, pair(1.0 / 720, 1.0 / 5040), pair(1.0 / 24, 1.0 / 120));
  const D s2 = xsimd::fma(r2, pair(1.0 / 3628800, 1.0 / 39916800), pair(1.0 / 40320, 1.0 / 362880));
  const D s3 = pair(1.0 / 479001600, 1.0 / 6227020800);
  const D p = xsimd::fma(r8, xsimd::fma(r4, s3, s2), xsimd::fma(r4, s1, s0));
  // n + 1023 + 2^52 holds n + 1023 (in [1, 1023]) in its low mantissa bits; shifted by 52 they are
  // the exponent field of 2^n, the 2^52's bits shifted out.
  const I bits = xsimd::bitwise_cast<I>(n + D(1023.0 + 4503599627370496.0)) << 52;
  const D result = p * xsimd::bitwise_cast<D>(bits);
  return xsimd::select(x >= lowest, result, xsimd::select(x < lowest, D(0.0), x));
}

// The same in float32: within 2 ulp for -87.34 <= x <= 0, 0 below (under 2^-126) and for -inf; NaN
// stays NaN. Taylor series up to r^7 (the rest is under 2^-27 of it): the read-out of the AFT
// mixer, whose float64 sums it meets narrowed to float32.
template <class A>
__attribute__((always_inline)) inline xsimd::batch<float, A> exp_nonpositive(
    const xsimd::batch<float, A>& x) {
  using F = xsimd::batch<float, A>;
  using I = xsimd::batch<int32_t, A>;
  const F lowest(-87.336544f);  // ln(2^-126)
  const F round(12582912.0f);   // 1.5 * 2^23: adding it rounds to an integer
  const F clamped = xsimd::max(x, lowest);
  const F n = xsimd::fma(clamped, F(1.44269504f), round) - round;
  // 16 significant bits in ln2's high part: n * high is exact.
  const F r =
      xsimd::fnma(n, F(1.42860682030941723e-6f), xsimd::fnma(n, F(0.693145751953125f), clamped));
  const F r2 = r * r;
  const auto pair = [&](float c0, float c1) { return xsimd::fma(r, F(c1), F(c0)); };
  const F low = xsimd::fma(r2, pair(1.0f / 2, 1.0f / 6), pair(1.0f, 1.0f));
  const F high = xsimd::fma(r2, pair(1.0f / 720, 1.0f / 5040), pair(1.0f / 24, 1.0f / 120));
  const F p = xsimd::fma(r2 * r2, high, low);
  // n + 127 + 2^23 holds n + 127 (in [1, 127]) in its low mantissa bits; shifted by 23 they are
  // the exponent field of 2^n.
  const I bits = xsimd::bitwise_cast<I>(n + F(127.0f + 8388608.0f)) << 23;
  const F result = p * xsimd::bitwise_cast<F>(bits);
  return xsimd::select(x >= lowest, result, xsimd::select(x < lowest, F(0.0f), x));
}

}  // namespace aft::kernels::simd
