// The streaming AFT accumulator on SIMD lanes (one lane per channel). State (m, a, b):
// a = sum exp(logit - m) v, b = sum exp(logit - m), m the running maximum logit.
#pragma once

#include <cstddef>

#include <xsimd/xsimd.hpp>

#include "kernels/simd_partial.hpp"

namespace aft::kernels::simd {

// Adds logit x with value v. One exp per lane: exp(min - max) = exp(-|x - m|) is the rescale of the
// old sums when x is a new maximum, else the weight of the new entry. Its argument is <= 0, so it
// never overflows; from m = -inf it is exp(-inf) = 0, giving a = v, b = 1.
template <class A>
void aft_add(xsimd::batch<float, A>& m, xsimd::batch<float, A>& a, xsimd::batch<float, A>& b,
             const xsimd::batch<float, A>& x, const xsimd::batch<float, A>& v) {
  using B = xsimd::batch<float, A>;
  const B hi = xsimd::max(m, x);
  const B e = xsimd::exp(xsimd::min(m, x) - hi);
  const auto grew = x > m;
  a = xsimd::select(grew, xsimd::fma(a, e, v), xsimd::fma(e, v, a));
  b = xsimd::select(grew, xsimd::fma(b, e, B(1.0f)), b + e);
  m = hi;
}

// The padding lanes of a tail get a valid state (m = 0, b = 1) and a zero entry.
template <class A>
void aft_accumulate_tail(std::size_t count, float* m, float* a, float* b,
                         const xsimd::batch<float, A>& x, const float* v) {
  auto mb = load_partial<A>(m, count, 0.0f);
  auto ab = load_partial<A>(a, count, 0.0f);
  auto bb = load_partial<A>(b, count, 1.0f);
  aft_add<A>(mb, ab, bb, x, load_partial<A>(v, count, 0.0f));
  store_partial<A>(mb, m, count);
  store_partial<A>(ab, a, count);
  store_partial<A>(bb, b, count);
}

template <class A>
void aft_accumulate_f32(std::size_t n, float* m, float* a, float* b, const float* k, const float* v,
                        float w) {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t L = B::size;
  const B wb(w);
  std::size_t c = 0;
  for (; c + L <= n; c += L) {
    B mb = B::load_unaligned(m + c), ab = B::load_unaligned(a + c), bb = B::load_unaligned(b + c);
    aft_add<A>(mb, ab, bb, B::load_unaligned(k + c) + wb, B::load_unaligned(v + c));
    mb.store_unaligned(m + c);
    ab.store_unaligned(a + c);
    bb.store_unaligned(b + c);
  }
  if (c < n) {
    aft_accumulate_tail<A>(n - c, m + c, a + c, b + c, load_partial<A>(k + c, n - c, 0.0f) + wb,
                           v + c);
  }
}

template <class A>
void aft_accumulate_biased_f32(std::size_t n, float* m, float* a, float* b, const float* k,
                               const float* v, const float* w) {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t L = B::size;
  std::size_t c = 0;
  for (; c + L <= n; c += L) {
    B mb = B::load_unaligned(m + c), ab = B::load_unaligned(a + c), bb = B::load_unaligned(b + c);
    aft_add<A>(mb, ab, bb, B::load_unaligned(k + c) + B::load_unaligned(w + c),
               B::load_unaligned(v + c));
    mb.store_unaligned(m + c);
    ab.store_unaligned(a + c);
    bb.store_unaligned(b + c);
  }
  if (c < n) {
    const std::size_t count = n - c;
    aft_accumulate_tail<A>(
        count, m + c, a + c, b + c,
        load_partial<A>(k + c, count, 0.0f) + load_partial<A>(w + c, count, 0.0f), v + c);
  }
}

}  // namespace aft::kernels::simd
