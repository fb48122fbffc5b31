// Read-out of the AFT mixer from the global sums (m, a, b) (float64) and the window sums (sa, sb),
// whose frame is r + w (the keys' reference plus the largest bias of the window): both are
// rescaled to their common maximum, so no exponent overflows (the same values as an exp of each
// side less the maximum: exp(0) is exactly 1 in both exps). In float32 lanes, as aft_output: the
// global sums narrowed, the frame r + w rounded once.
#pragma once

#include <cstddef>

#include <xsimd/xsimd.hpp>

#include "kernels/f32_aft_output.hpp"
#include "kernels/simd_partial.hpp"

namespace aft::kernels::simd {

template <class A>
void aft_window_output_f32(std::size_t n, const float* q, const double* m, const double* a,
                           const double* b, const float* r, const float* w, const float* sa,
                           const float* sb, float* y) {
  using F = xsimd::batch<float, A>;
  constexpr std::size_t L = F::size;
  for (std::size_t c = 0; c < n; c += L) {
    const std::size_t count = c + L <= n ? L : n - c;
    // Padding lanes: an empty global state (a = b = 0) and a window sum of 1.
    const F mb = load_narrowed<A>(m + c, count, 0.0f);
    const F frame = load_lanes<A>(r + c, count, 0.0f) + load_lanes<A>(w + c, count, 0.0f);
    // One exp: the smaller side's rescale, exp(min - max); the larger side's is exp(0) = 1.
    const F e = exp_nonpositive<A>(xsimd::min(mb, frame) - xsimd::max(mb, frame));
    const auto global_larger = mb >= frame;
    const F global = xsimd::select(global_larger, F(1.0f), e);
    const F window = xsimd::select(global_larger, e, F(1.0f));
    const F num = xsimd::fma(load_narrowed<A>(a + c, count, 0.0f), global,
                             load_lanes<A>(sa + c, count, 0.0f) * window);
    const F den = xsimd::fma(load_narrowed<A>(b + c, count, 0.0f), global,
                             load_lanes<A>(sb + c, count, 1.0f) * window);
    store_lanes<A>(aft_output<A>(load_lanes<A>(q + c, count, 0.0f), num, den), y + c, count);
  }
}

}  // namespace aft::kernels::simd
