// Read-out of the AFT mixer from the global sums (m, a, b) and the window sums (sa, sb), whose
// frame is r + w (the keys' reference plus the largest bias of the window): both are rescaled to
// their common maximum, so no exponent overflows.
#pragma once

#include <cstddef>

#include <xsimd/xsimd.hpp>

#include "kernels/f32_aft_output.hpp"
#include "kernels/simd_partial.hpp"

namespace aft::kernels::simd {

template <class A>
void aft_window_output_f32(std::size_t n, const float* q, const float* m, const float* a,
                           const float* b, const float* r, const float* w, const float* sa,
                           const float* sb, float* y) {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t L = B::size;
  for (std::size_t c = 0; c < n; c += L) {
    const std::size_t count = c + L <= n ? L : n - c;
    // Padding lanes: an empty global state (m = -inf gives weight 0) and a window sum of 1.
    const B mb = load_lanes<A>(m + c, count, 0.0f);
    const B frame = load_lanes<A>(r + c, count, 0.0f) + load_lanes<A>(w + c, count, 0.0f);
    const B top = xsimd::max(mb, frame);
    const B global = xsimd::exp(mb - top);
    const B window = xsimd::exp(frame - top);
    const B num = xsimd::fma(load_lanes<A>(a + c, count, 0.0f), global,
                             load_lanes<A>(sa + c, count, 0.0f) * window);
    const B den = xsimd::fma(load_lanes<A>(b + c, count, 0.0f), global,
                             load_lanes<A>(sb + c, count, 1.0f) * window);
    store_lanes<A>(aft_output<A>(load_lanes<A>(q + c, count, 0.0f), num, den), y + c, count);
  }
}

}  // namespace aft::kernels::simd
