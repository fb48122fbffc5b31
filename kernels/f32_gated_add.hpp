// y += sigmoid(g) * x: RWKV-4's channel mixing adds its gated output to the residual stream
// (float32 in and out, the gate and the product in float64 as the AFT read-out computes them).
#pragma once

#include <cstddef>

#include <xsimd/xsimd.hpp>

#include "kernels/simd_exp.hpp"
#include "kernels/simd_partial.hpp"

namespace aft::kernels::simd {

template <class A>
void gated_add_f32(std::size_t n, const float* g, const float* x, float* y) {
  using D = xsimd::batch<double, A>;
  constexpr std::size_t L = D::size;
  for (std::size_t c = 0; c < n; c += L) {
    const std::size_t count = c + L <= n ? L : n - c;
    const D gate = load_widened<A>(g + c, count, 0.0);
    // sigmoid from e = exp(-|g|) <= 1, as aft_output: no overflow for any finite g.
    const D e = exp_nonpositive<A>(-xsimd::abs(gate));
    const D sigmoid = xsimd::select(gate >= D(0.0), D(1.0), e) / (D(1.0) + e);
    store_narrowed<A>(
        xsimd::fma(sigmoid, load_widened<A>(x + c, count, 0.0), load_widened<A>(y + c, count, 0.0)),
        y + c, count);
  }
}

}  // namespace aft::kernels::simd
