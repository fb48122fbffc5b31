// Layer normalization in two passes over data shifted by x[0]: the sums of (x - x[0]) and of
// squared deviations keep their rounding error proportional to the spread of x, not to a common
// offset (a float mean of values near 1000, or sum(x^2) - n mean^2, would lose most digits). Biased
// variance, as PyTorch.
#pragma once

#include <cstddef>

#include <xsimd/xsimd.hpp>

#include "kernels/simd_partial.hpp"

namespace aft::kernels::simd {

template <class A>
void layer_norm_f32(std::size_t n, const float* x, const float* gamma, const float* beta, float eps,
                    float* y) {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t L = B::size;
  if (n == 0) return;
  const std::size_t body = n - n % L;
  const std::size_t tail = n - body;
  const B shift(x[0]);

  // Two accumulators halve the dependency chains (and their rounding error growth).
  B sum0(0.0f), sum1(0.0f);
  std::size_t i = 0;
  for (; i + 2 * L <= body; i += 2 * L) {
    sum0 += B::load_unaligned(x + i) - shift;
    sum1 += B::load_unaligned(x + i + L) - shift;
  }
  if (i < body) sum0 += B::load_unaligned(x + i) - shift;
  if (tail) sum1 += load_partial<A>(x + body, tail, x[0]) - shift;  // padding lanes add 0
  // mean - x[0]: small when the data cluster, so its rounding to float is harmless.
  const B centre(xsimd::hadd(sum0 + sum1) / static_cast<float>(n));

  B sq0(0.0f), sq1(0.0f);
  for (i = 0; i + 2 * L <= body; i += 2 * L) {
    const B d0 = (B::load_unaligned(x + i) - shift) - centre;
    const B d1 = (B::load_unaligned(x + i + L) - shift) - centre;
    sq0 = xsimd::fma(d0, d0, sq0);
    sq1 = xsimd::fma(d1, d1, sq1);
  }
  if (i < body) {
    const B d0 = (B::load_unaligned(x + i) - shift) - centre;
    sq0 = xsimd::fma(d0, d0, sq0);
  }
  if (tail) {
    const B d1 = xsimd::select(first_lanes<A>(tail),
                               (load_partial<A>(x + body, tail, 0.0f) - shift) - centre, B(0.0f));
    sq1 = xsimd::fma(d1, d1, sq1);
  }
  const float var = xsimd::hadd(sq0 + sq1) / static_cast<float>(n);
  // Exact sqrt and division (xsimd's rsqrt is an approximation).
  const B rstd = B(1.0f) / xsimd::sqrt(B(var + eps));

  for (i = 0; i < body; i += L) {
    const B normalized = ((B::load_unaligned(x + i) - shift) - centre) * rstd;
    xsimd::fma(normalized, B::load_unaligned(gamma + i), B::load_unaligned(beta + i))
        .store_unaligned(y + i);
  }
  if (tail) {
    const B normalized = ((load_partial<A>(x + body, tail, 0.0f) - shift) - centre) * rstd;
    const B out = xsimd::fma(normalized, load_partial<A>(gamma + body, tail, 0.0f),
                             load_partial<A>(beta + body, tail, 0.0f));
    store_partial<A>(out, y + body, tail);
  }
}

}  // namespace aft::kernels::simd
