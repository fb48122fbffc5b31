// Window sums of the AFT mixer in the frame of f32_aft_window_frame.hpp: sa = sum_j e_j u_j v_j,
// sb = sum_j e_j u_j, in entry order for every lane (so results do not depend on how lanes are
// grouped). Four batches at a time keep eight multiply-add chains in flight.
#pragma once

#include <cstddef>

#include <xsimd/xsimd.hpp>

#include "kernels/kernels.h"
#include "kernels/simd_partial.hpp"

namespace aft::kernels::simd {

// Entry j's weight for lanes starting at c: a scalar shared by the channels, or a row.
struct ScalarWeights {
  const float* e;
  template <class A>
  xsimd::batch<float, A> at(std::size_t j, std::size_t, std::size_t) const {
    return xsimd::batch<float, A>(e[j]);
  }
};
struct RowWeights {
  const float* const* rows;
  template <class A>
  xsimd::batch<float, A> at(std::size_t j, std::size_t c, std::size_t count) const {
    return load_lanes<A>(rows[j] + c, count, 0.0f);
  }
};

// Batches full batches from lane c, or (Batches == 1, count < size) one tail batch.
template <class A, std::size_t Batches, class Weights>
[[gnu::always_inline]] inline bool aft_window_sums_batches(
    std::size_t c, std::size_t count, std::size_t entries, const Weights& weights,
    const float* const* u_rows, const float* const* v_rows, float* sa, float* sb) {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t L = B::size;
  // Unrolled, so that the accumulators stay in registers.
  B a[Batches], b[Batches];
#pragma GCC unroll 4
  for (std::size_t i = 0; i < Batches; ++i) a[i] = b[i] = B(0.0f);
  for (std::size_t j = 0; j < entries; ++j) {
    const float* u = u_rows[j] + c;
    const float* v = v_rows[j] + c;
#pragma GCC unroll 4
    for (std::size_t i = 0; i < Batches; ++i) {
      const B p =
          weights.template at<A>(j, c + i * L, count) * load_lanes<A>(u + i * L, count, 0.0f);
      b[i] += p;
      a[i] = xsimd::fma(p, load_lanes<A>(v + i * L, count, 0.0f), a[i]);
    }
  }
  bool stable = true;
#pragma GCC unroll 4
  for (std::size_t i = 0; i < Batches; ++i) {
    store_lanes<A>(a[i], sa + c + i * L, count);
    store_lanes<A>(b[i], sb + c + i * L, count);
    const B checked = count == L ? b[i] : xsimd::select(first_lanes<A>(count), b[i], B(1.0f));
    stable = stable && xsimd::all(checked >= B(kAftWindowMinSum));
  }
  return stable;
}

template <class A, class Weights>
bool aft_window_sums(std::size_t n, std::size_t entries, const Weights& weights,
                     const float* const* u_rows, const float* const* v_rows, float* sa, float* sb) {
  constexpr std::size_t L = xsimd::batch<float, A>::size;
  bool stable = true;
  std::size_t c = 0;
  for (; c + 4 * L <= n; c += 4 * L) {
    stable &= aft_window_sums_batches<A, 4>(c, L, entries, weights, u_rows, v_rows, sa, sb);
  }
  for (; c < n; c += L) {
    stable &= aft_window_sums_batches<A, 1>(c, c + L <= n ? L : n - c, entries, weights, u_rows,
                                            v_rows, sa, sb);
  }
  return stable;
}

template <class A>
bool aft_window_sums_f32(std::size_t n, std::size_t entries, const float* e,
                         const float* const* u_rows, const float* const* v_rows, float* sa,
                         float* sb) {
  return aft_window_sums<A>(n, entries, ScalarWeights{e}, u_rows, v_rows, sa, sb);
}

template <class A>
bool aft_window_sums_biased_f32(std::size_t n, std::size_t entries, const float* const* e_rows,
                                const float* const* u_rows, const float* const* v_rows, float* sa,
                                float* sb) {
  return aft_window_sums<A>(n, entries, RowWeights{e_rows}, u_rows, v_rows, sa, sb);
}

}  // namespace aft::kernels::simd
