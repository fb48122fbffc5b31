// Read-out of the AFT mixer from the global sums (m, a, b) (float64) and the window sums (sa, sb),
// whose frame is r + w (the keys' reference plus the largest bias of the window): both are
// rescaled to their common maximum, so no exponent overflows (the same values as an exp of each
// side less the maximum: exp(0) is exactly 1 in both exps). Computed in float64, as the global
// sums are kept.
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
  using D = xsimd::batch<double, A>;
  constexpr std::size_t L = D::size;
  for (std::size_t c = 0; c < n; c += L) {
    const std::size_t count = c + L <= n ? L : n - c;
    // Padding lanes: an empty global state (a = b = 0) and a window sum of 1.
    const D mb = load_lanes<A>(m + c, count, 0.0);
    const D frame = load_widened<A>(r + c, count, 0.0) + load_widened<A>(w + c, count, 0.0);
    // One exp: the smaller side's rescale, exp(min - max); the larger side's is exp(0) = 1.
    const D e = exp_nonpositive<A>(xsimd::min(mb, frame) - xsimd::max(mb, frame));
    const auto global_larger = mb >= frame;
    const D global = xsimd::select(global_larger, D(1.0), e);
    const D window = xsimd::select(global_larger, e, D(1.0));
    const D num = xsimd::fma(load_lanes<A>(a + c, count, 0.0), global,
                             load_widened<A>(sa + c, count, 0.0) * window);
    const D den = xsimd::fma(load_lanes<A>(b + c, count, 0.0), global,
                             load_widened<A>(sb + c, count, 1.0) * window);
    store_narrowed<A>(aft_output<A>(load_widened<A>(q + c, count, 0.0), num, den), y + c, count);
  }
}

}  // namespace aft::kernels::simd
