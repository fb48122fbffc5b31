// In place: x = max(x, 0), and its square (RWKV-4's channel mixing).
#pragma once

#include <cstddef>

#include <xsimd/xsimd.hpp>

namespace aft::kernels::simd {

template <class A>
void relu_f32(std::size_t n, float* x) {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t L = B::size;
  const B zero(0.0f);
  std::size_t i = 0;
  for (; i + L <= n; i += L) xsimd::max(B::load_unaligned(x + i), zero).store_unaligned(x + i);
  for (; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

template <class A>
void relu_squared_f32(std::size_t n, float* x) {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t L = B::size;
  const B zero(0.0f);
  std::size_t i = 0;
  for (; i + L <= n; i += L) {
    const B r = xsimd::max(B::load_unaligned(x + i), zero);
    (r * r).store_unaligned(x + i);
  }
  for (; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] * x[i] : 0.0f;
}

}  // namespace aft::kernels::simd
