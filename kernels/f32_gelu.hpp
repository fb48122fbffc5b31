// In place: the exact (erf) GELU, PyTorch's default.
#pragma once

#include <cstddef>

#include <xsimd/xsimd.hpp>

#include "kernels/simd_partial.hpp"

namespace aft::kernels::simd {

// 0.5 x erfc(-x / sqrt 2), the exact GELU; erfc instead of 1 + erf(..) avoids cancellation for
// negative x.
template <class A>
xsimd::batch<float, A> gelu(const xsimd::batch<float, A>& x) {
  using B = xsimd::batch<float, A>;
  return B(0.5f) * x * xsimd::erfc(x * B(-0.70710678118654752f));
}

template <class A>
void gelu_f32(std::size_t n, float* x) {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t L = B::size;
  std::size_t i = 0;
  for (; i + L <= n; i += L) gelu<A>(B::load_unaligned(x + i)).store_unaligned(x + i);
  if (i < n) store_partial<A>(gelu<A>(load_partial<A>(x + i, n - i, 0.0f)), x + i, n - i);
}

}  // namespace aft::kernels::simd
