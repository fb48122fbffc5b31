// y = sigmoid(q) * a / b, the read-out of the AFT accumulator.
#pragma once

#include <cstddef>

#include <xsimd/xsimd.hpp>

#include "kernels/simd_partial.hpp"

namespace aft::kernels::simd {

// sigmoid from e = exp(-|q|) <= 1: 1 / (1 + e) for q >= 0, e / (1 + e) below; no overflow, and
// relative accuracy is kept for very negative q.
template <class A>
xsimd::batch<float, A> aft_output(const xsimd::batch<float, A>& q, const xsimd::batch<float, A>& a,
                                  const xsimd::batch<float, A>& b) {
  using B = xsimd::batch<float, A>;
  const B e = xsimd::exp(-xsimd::abs(q));
  const B s = xsimd::select(q >= B(0.0f), B(1.0f), e) / (B(1.0f) + e);
  return s * (a / b);
}

template <class A>
void aft_output_f32(std::size_t n, const float* q, const float* a, const float* b, float* y) {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t L = B::size;
  std::size_t c = 0;
  for (; c + L <= n; c += L) {
    aft_output<A>(B::load_unaligned(q + c), B::load_unaligned(a + c), B::load_unaligned(b + c))
        .store_unaligned(y + c);
  }
  if (c < n) {
    const std::size_t count = n - c;
    const B out =
        aft_output<A>(load_partial<A>(q + c, count, 0.0f), load_partial<A>(a + c, count, 0.0f),
                      load_partial<A>(b + c, count, 1.0f));
    store_partial<A>(out, y + c, count);
  }
}

}  // namespace aft::kernels::simd
