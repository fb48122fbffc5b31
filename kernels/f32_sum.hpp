// sum(x): the streaming-read probe of aft-bench. Four accumulators keep enough loads in flight to
// saturate memory bandwidth (one chain would be bound by the add latency instead).
#pragma once

#include <cstddef>

#include <xsimd/xsimd.hpp>

#include "kernels/simd_partial.hpp"

namespace aft::kernels::simd {

template <class A>
float sum_f32(std::size_t n, const float* x) {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t L = B::size;
  B s0(0.0f), s1(0.0f), s2(0.0f), s3(0.0f);
  std::size_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    s0 += B::load_unaligned(x + i);
    s1 += B::load_unaligned(x + i + L);
    s2 += B::load_unaligned(x + i + 2 * L);
    s3 += B::load_unaligned(x + i + 3 * L);
  }
  for (; i + L <= n; i += L) s0 += B::load_unaligned(x + i);
  if (i < n) s1 += load_partial<A>(x + i, n - i, 0.0f);  // padding lanes add 0
  return xsimd::hadd((s0 + s1) + (s2 + s3));
}

}  // namespace aft::kernels::simd
