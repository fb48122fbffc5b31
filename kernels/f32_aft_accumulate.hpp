// The streaming AFT accumulator on SIMD lanes (one lane per channel). State (m, a, b) in float64:
// a = sum exp(logit - m) v, b = sum exp(logit - m), m the running maximum logit. b grows with the
// positions summed (AFT-simple and AFT-conv have no end): in float32, terms below half an ulp of b
// were rounded away (every term of weight <= 1 from 2^24 positions on), and the rescale of each new
// maximum compounded its rounding. float64 keeps 2^29 times more (kernels/README.md).
#pragma once

#include <cstddef>

#include <xsimd/xsimd.hpp>

#include "kernels/simd_exp.hpp"
#include "kernels/simd_partial.hpp"

namespace aft::kernels::simd {

// Adds logit x with value v. One exp per lane: exp(min - max) = exp(-|x - m|) is the rescale of the
// old sums when x is a new maximum, else the weight of the new entry. Its argument is <= 0, so it
// never overflows; from m = -inf it is exp(-inf) = 0, giving a = v, b = 1. Always inlined, as
// exp_nonpositive (a call spills every vector register).
template <class A>
__attribute__((always_inline)) inline void aft_add(xsimd::batch<double, A>& m,
                                                   xsimd::batch<double, A>& a,
                                                   xsimd::batch<double, A>& b,
                                                   const xsimd::batch<double, A>& x,
                                                   const xsimd::batch<double, A>& v) {
  using D = xsimd::batch<double, A>;
  const D hi = xsimd::max(m, x);
  const D e = exp_nonpositive<A>(xsimd::min(m, x) - hi);
  const auto grew = x > m;
  a = xsimd::select(grew, xsimd::fma(a, e, v), xsimd::fma(e, v, a));
  b = xsimd::select(grew, xsimd::fma(b, e, D(1.0)), b + e);
  m = hi;
}

// bias(c, count): the biases of channels [c, c + count) as a batch. The logit k + bias is summed in
// float64. Padding lanes of a tail get a valid state (m = 0, b = 1) and a zero entry.
template <class A, class Bias>
void aft_accumulate(std::size_t n, double* m, double* a, double* b, const float* k, const float* v,
                    const Bias& bias) {
  using D = xsimd::batch<double, A>;
  constexpr std::size_t L = D::size;
  for (std::size_t c = 0; c < n; c += L) {
    const std::size_t count = c + L <= n ? L : n - c;
    D mb = load_lanes<A>(m + c, count, 0.0);
    D ab = load_lanes<A>(a + c, count, 0.0);
    D bb = load_lanes<A>(b + c, count, 1.0);
    aft_add<A>(mb, ab, bb, load_widened<A>(k + c, count, 0.0) + bias(c, count),
               load_widened<A>(v + c, count, 0.0));
    store_lanes<A>(mb, m + c, count);
    store_lanes<A>(ab, a + c, count);
    store_lanes<A>(bb, b + c, count);
  }
}

template <class A>
void aft_accumulate_f32(std::size_t n, double* m, double* a, double* b, const float* k,
                        const float* v, float w) {
  const xsimd::batch<double, A> wb(w);
  aft_accumulate<A>(n, m, a, b, k, v, [&](std::size_t, std::size_t) { return wb; });
}

template <class A>
void aft_accumulate_biased_f32(std::size_t n, double* m, double* a, double* b, const float* k,
                               const float* v, const float* w) {
  aft_accumulate<A>(n, m, a, b, k, v, [&](std::size_t c, std::size_t count) {
    return load_widened<A>(w + c, count, 0.0);
  });
}

}  // namespace aft::kernels::simd
