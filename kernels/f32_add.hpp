// y += x (the residual add).
#pragma once

#include <cstddef>

#include <xsimd/xsimd.hpp>

namespace aft::kernels::simd {

template <class A>
void add_f32(std::size_t n, const float* x, float* y) {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t L = B::size;
  std::size_t i = 0;
  for (; i + L <= n; i += L) {
    (B::load_unaligned(y + i) + B::load_unaligned(x + i)).store_unaligned(y + i);
  }
  for (; i < n; ++i) y[i] += x[i];
}

}  // namespace aft::kernels::simd
