// y = sigmoid(q) * a / b, the read-out of the AFT accumulator (float64 sums, float32 in and out).
#pragma once

#include <cstddef>

#include <xsimd/xsimd.hpp>

#include "kernels/simd_exp.hpp"
#include "kernels/simd_partial.hpp"

namespace aft::kernels::simd {

// sigmoid from e = exp(-|q|) <= 1: 1 / (1 + e) for q >= 0, e / (1 + e) below; no overflow, and
// relative accuracy is kept for very negative q. One division for both quotients.
template <class A>
__attribute__((always_inline)) inline xsimd::batch<double, A> aft_output(
    const xsimd::batch<double, A>& q, const xsimd::batch<double, A>& a,
    const xsimd::batch<double, A>& b) {
  using D = xsimd::batch<double, A>;
  const D e = exp_nonpositive<A>(-xsimd::abs(q));
  return xsimd::select(q >= D(0.0), a, e * a) / ((D(1.0) + e) * b);
}

template <class A>
void aft_output_f32(std::size_t n, const float* q, const double* a, const double* b, float* y) {
  constexpr std::size_t L = xsimd::batch<double, A>::size;
  for (std::size_t c = 0; c < n; c += L) {
    const std::size_t count = c + L <= n ? L : n - c;
    store_narrowed<A>(
        aft_output<A>(load_widened<A>(q + c, count, 0.0), load_lanes<A>(a + c, count, 0.0),
                      load_lanes<A>(b + c, count, 1.0)),
        y + c, count);
  }
}

}  // namespace aft::kernels::simd
