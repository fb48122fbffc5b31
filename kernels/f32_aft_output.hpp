// y = sigmoid(q) * a / b, the read-out of the AFT accumulator: float64 sums narrowed to float32,
// the quotient in float32 lanes (float32 in and out). Within a few float ulps of the float64
// quotient, with twice the lanes and a float division (a double division per 8 lanes was half
// the read-out's time).
#pragma once

#include <cstddef>

#include <xsimd/xsimd.hpp>

#include "kernels/simd_exp.hpp"
#include "kernels/simd_partial.hpp"

namespace aft::kernels::simd {

// sigmoid from e = exp(-|q|) <= 1: 1 / (1 + e) for q >= 0, e / (1 + e) below; no overflow, and
// relative accuracy is kept for very negative q. One division for both quotients.
template <class A>
__attribute__((always_inline)) inline xsimd::batch<float, A> aft_output(
    const xsimd::batch<float, A>& q, const xsimd::batch<float, A>& a,
    const xsimd::batch<float, A>& b) {
  using F = xsimd::batch<float, A>;
  const F e = exp_nonpositive<A>(-xsimd::abs(q));
  return xsimd::select(q >= F(0.0f), a, e * a) / ((F(1.0f) + e) * b);
}

template <class A>
void aft_output_f32(std::size_t n, const float* q, const double* a, const double* b, float* y) {
  constexpr std::size_t L = xsimd::batch<float, A>::size;
  for (std::size_t c = 0; c < n; c += L) {
    const std::size_t count = c + L <= n ? L : n - c;
    store_lanes<A>(
        aft_output<A>(load_lanes<A>(q + c, count, 0.0f), load_narrowed<A>(a + c, count, 0.0f),
                      load_narrowed<A>(b + c, count, 1.0f)),
        y + c, count);
  }
}

}  // namespace aft::kernels::simd
