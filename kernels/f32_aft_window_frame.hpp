// The frame of the AFT window: per channel a reference r at least every windowed key, each entry
// kept as u = exp(k - r) <= 1, so that reading the window costs multiply-adds instead of an exp
// per entry and token (kernels.h, "AFT window"). A key above r raises r to the key plus
// kAftWindowHeadroom, so that the next keys seldom rescale the window again.
#pragma once

#include <cstddef>
#include <limits>

#include <xsimd/xsimd.hpp>

#include "kernels/kernels.h"
#include "kernels/simd_exp.hpp"
#include "kernels/simd_partial.hpp"

namespace aft::kernels::simd {

// One batch of lanes [c, c + count): count == B::size for full batches. The padding lanes of a
// tail read key 0 and reference 0, so they never look like a new maximum. Inlined in the loop
// over the batches, which then sets up the exp's constants once: a call per batch set them up
// and spilled them each time (its own time doubled at 2 threads in enwik8-local's prompts).
template <class A>
[[gnu::always_inline]] inline void aft_window_push_batch(std::size_t c, std::size_t count,
                                                         std::size_t entries, float* const* u_rows,
                                                         float* r, const float* k, float* u_new) {
  using B = xsimd::batch<float, A>;
  const B key = load_lanes<A>(k + c, count, 0.0f);
  B ref = load_lanes<A>(r + c, count, 0.0f);
  const auto grew = key > ref;
  if (xsimd::any(grew)) {
    // exp(r_old - r) < 1 where the key is a new maximum; from r = -inf there are no older entries.
    const B raised = xsimd::select(grew, key + B(kAftWindowHeadroom), ref);
    const B scale = xsimd::select(grew, exp_nonpositive<A>(ref - raised), B(1.0f));
    for (std::size_t j = 0; j < entries; ++j) {
      store_lanes<A>(load_lanes<A>(u_rows[j] + c, count, 0.0f) * scale, u_rows[j] + c, count);
    }
    ref = raised;
    store_lanes<A>(ref, r + c, count);
  }
  store_lanes<A>(exp_nonpositive<A>(key - ref), u_new + c, count);
}

template <class A>
void aft_window_push_f32(std::size_t n, std::size_t entries, float* const* u_rows, float* r,
                         const float* k, float* u_new) {
  constexpr std::size_t L = xsimd::batch<float, A>::size;
  std::size_t c = 0;
  for (; c + L <= n; c += L) aft_window_push_batch<A>(c, L, entries, u_rows, r, k, u_new);
  if (c < n) aft_window_push_batch<A>(c, n - c, entries, u_rows, r, k, u_new);
}

template <class A>
void aft_window_reframe_f32(std::size_t n, std::size_t entries, const float* const* k_rows,
                            float* const* u_rows, float* r) {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t L = B::size;
  for (std::size_t c = 0; c < n; c += L) {
    const std::size_t count = c + L <= n ? L : n - c;
    B ref(-std::numeric_limits<float>::infinity());
    for (std::size_t j = 0; j < entries; ++j) {
      ref = xsimd::max(ref, load_lanes<A>(k_rows[j] + c, count, 0.0f));
    }
    for (std::size_t j = 0; j < entries; ++j) {
      store_lanes<A>(exp_nonpositive<A>(load_lanes<A>(k_rows[j] + c, count, 0.0f) - ref),
                     u_rows[j] + c, count);
    }
    store_lanes<A>(ref, r + c, count);
  }
}

}  // namespace aft::kernels::simd
