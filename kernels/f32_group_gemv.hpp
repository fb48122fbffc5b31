// y[r] = dot(w[r, :], x) + bias[r] over packed f32 weights (packed_weights.h: groups of 16 rows,
// column after column), for one vector x (gemv_f32_groups) or several (gemv_batch_f32_groups, a
// batch of sequences decoding together). Rows in lanes: per column, one load of each group's
// column serves every vector of the block, and the column's value of each vector, broadcast,
// serves every row; one FMA chain per (row register, vector) runs down the columns in order, and
// the bias is added last. No horizontal sums, no per-call cost but the stores, and each row's sum
// is the plain sequential sum over the columns whatever the block's shape: gemv_batch_f32_groups
// gives each vector the bits of gemv_f32_groups, and every table with FMA the same bits. A pass
// of several blocks asks, as its blocks compute, for the next pass's weights in L2 (kPrefetchNext).
// Single-threaded.
#pragma once

#include <cstddef>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "kernels/kernels.h"
#include "kernels/simd_prefetch.hpp"
#include "kernels/simd_register.hpp"

namespace aft::kernels::simd {

// a * b + c, rounded once where the architecture has FMA. xsimd 8.1's fma on AVX-512 is a product
// and a sum that only the compiler's contraction fuses (not at -O1 under the sanitizers), so the
// intrinsic there: the same bits in every build.
template <class A>
[[gnu::always_inline]] inline xsimd::batch<float, A> fused_multiply_add(
    const xsimd::batch<float, A>& a, const xsimd::batch<float, A>& b,
    const xsimd::batch<float, A>& c) {
#if XSIMD_WITH_AVX512F
  if constexpr (std::is_base_of<xsimd::avx512f, A>::value) return _mm512_fmadd_ps(a, b, c);
#endif
  return xsimd::fma(a, b, c);
}

// Groups per pass and vectors per block. AVX-512 (measured on a Zen 4, docs/benchmarks.md): 2
// groups by 8 vectors, 16 accumulators, read 11-14 GB/s of weights from memory on one thread,
// 80-95% of the FMA peak. With 16 registers (AVX2, SSE2) a group's 2 or 4 registers by 6 or 2
// vectors; NEON's 32 registers take 4 by 6. One vector takes one group at a time: one sequential
// stream (31-32 GB/s from memory on the Zen 4 at 1024 columns, against 29 for 2 groups' two).
template <class A>
struct F32GroupBlocks {
  static constexpr std::size_t kLanes = xsimd::batch<float, A>::size;
  static constexpr std::size_t kRegisters = kF32GroupRows / kLanes;  // per group column
  static constexpr std::size_t kGroups = kLanes >= 16 ? 2 : 1;
  static constexpr std::size_t kGroupsAlone = 1;
  static constexpr std::size_t kVectors =
      kLanes >= 16 ? 8 : (XSIMD_WITH_NEON64 || kLanes == 8 ? 6 : 2);
  // Whether a pass of more than kVectors vectors (several blocks, each reading the groups again)
  // prefetches the next pass's weights to L2 while its blocks compute: the first block otherwise
  // waits for memory in every pass. Measured on a Zen 5 (aft-gemv-bench 512 512 and 2048 512, 16
  // vectors from memory): AVX-512 12.4 -> 22-23 GB/s, AVX2 8.9 -> 10.1-10.4, the same in cache;
  // SSE2 the same from memory and 12% slower in cache (a prefetch step per column of 4-lane work).
  static constexpr bool kPrefetchNext = kLanes >= 8;
};

// G groups from the group at w (rows [0, rows) of them written, rows <= 16 G) for V vectors: x of
// vector j at x + j * x_stride, its y at y + j * y_stride.
template <class A, std::size_t G, std::size_t V>
[[gnu::always_inline]] inline void gemv_f32_group_block(std::size_t cols, const float* w,
                                                        const float* x, std::size_t x_stride,
                                                        const float* bias, std::size_t rows,
                                                        float* y, std::size_t y_stride,
                                                        Prefetch<A, PrefetchTo::kL2> next) {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t L = B::size;
  constexpr std::size_t R = G * F32GroupBlocks<A>::kRegisters;  // row registers
  constexpr std::size_t P = F32GroupBlocks<A>::kRegisters;
  const std::size_t group_stride = kF32GroupRows * cols;
  B acc[R][V];
  for (std::size_t i = 0; i < R; ++i) {
    for (std::size_t j = 0; j < V; ++j) acc[i][j] = B(0.0f);
  }
  for (std::size_t c = 0; c < cols; ++c) {
    next.step();
    B wv[R];
    for (std::size_t i = 0; i < R; ++i) {
      wv[i] = B::load_unaligned(w + i / P * group_stride + c * kF32GroupRows + i % P * L);
      keep_in_register(wv[i]);
    }
    for (std::size_t j = 0; j < V; ++j) {
      const B xv(x[j * x_stride + c]);
      for (std::size_t i = 0; i < R; ++i) acc[i][j] = fused_multiply_add(wv[i], xv, acc[i][j]);
    }
  }
  for (std::size_t j = 0; j < V; ++j) {
    float* out = y + j * y_stride;
    if (rows == R * L) {
      for (std::size_t i = 0; i < R; ++i) {
        const B sum = bias ? acc[i][j] + B::load_unaligned(bias + i * L) : acc[i][j];
        sum.store_unaligned(out + i * L);
      }
      continue;
    }
    alignas(A::alignment()) float sums[R * L];
    for (std::size_t i = 0; i < R; ++i) acc[i][j].store_aligned(sums + i * L);
    for (std::size_t r = 0; r < rows; ++r) out[r] = bias ? sums[r] + bias[r] : sums[r];
  }
}

// The block of n vectors, 1 <= n <= V: the instance of that count.
template <class A, std::size_t G, std::size_t V>
inline void gemv_f32_group_vectors(std::size_t n, std::size_t cols, const float* w, const float* x,
                                   std::size_t x_stride, const float* bias, std::size_t rows,
                                   float* y, std::size_t y_stride,
                                   Prefetch<A, PrefetchTo::kL2> next) {
  if (n == V) {
    gemv_f32_group_block<A, G, V>(cols, w, x, x_stride, bias, rows, y, y_stride, next);
  } else if constexpr (V > 1) {
    gemv_f32_group_vectors<A, G, V - 1>(n, cols, w, x, x_stride, bias, rows, y, y_stride, next);
  }
}

// G groups for every vector, in blocks of at most V vectors as equal as can be (16 by 8: 8, 8; 13:
// 7, 6); the groups' weights stay in cache while the blocks pass.
template <class A, std::size_t G, std::size_t V>
inline void gemv_f32_group_pass(std::size_t cols, const float* w, std::size_t n_vectors,
                                const float* x, std::size_t x_stride, const float* bias,
                                std::size_t rows, float* y, std::size_t y_stride, const float* next,
                                std::size_t next_bytes) {
  const std::size_t blocks = (n_vectors + V - 1) / V;
  std::size_t v = 0;
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t n = n_vectors / blocks + (b < n_vectors % blocks ? 1 : 0);
    gemv_f32_group_vectors<A, G, V>(
        n, cols, w, x + v * x_stride, x_stride, bias, rows, y + v * y_stride, y_stride,
        Prefetch<A, PrefetchTo::kL2>::part_of(next, next_bytes, b, blocks, cols));
    v += n;
  }
}

// Passes of G groups, then one group at a time; the last group may hold fewer than 16 rows.
template <class A, std::size_t G, std::size_t V>
void gemv_f32_group_passes(std::size_t rows, std::size_t cols, const float* w,
                           std::size_t n_vectors, const float* x, std::size_t x_stride,
                           const float* bias, float* y, std::size_t y_stride) {
  // Passes of several blocks: each block asks for its share of the next pass's weights.
  const bool prefetch = F32GroupBlocks<A>::kPrefetchNext && n_vectors > V;
  const auto next_bytes = [&](std::size_t next_row, std::size_t pass_rows) {
    const std::size_t left = rows - std::min(rows, next_row);
    return prefetch ? std::min(pass_rows, left) * cols * sizeof(float) : 0;
  };
  std::size_t r = 0;
  for (; r + G * kF32GroupRows <= rows; r += G * kF32GroupRows) {
    const std::size_t next = r + G * kF32GroupRows;
    gemv_f32_group_pass<A, G, V>(cols, w + r * cols, n_vectors, x, x_stride,
                                 bias ? bias + r : nullptr, G * kF32GroupRows, y + r, y_stride,
                                 w + next * cols, next_bytes(next, G * kF32GroupRows));
  }
  for (; r < rows; r += kF32GroupRows) {
    const std::size_t n = rows - r < kF32GroupRows ? rows - r : kF32GroupRows;
    const std::size_t next = r + kF32GroupRows;
    gemv_f32_group_pass<A, 1, V>(cols, w + r * cols, n_vectors, x, x_stride,
                                 bias ? bias + r : nullptr, n, y + r, y_stride, w + next * cols,
                                 next_bytes(next, kF32GroupRows));
  }
}

template <class A>
void gemv_batch_f32_groups(std::size_t rows, std::size_t cols, const float* w,
                           std::size_t n_vectors, const float* x, std::size_t x_stride,
                           const float* bias, float* y, std::size_t y_stride) {
  using S = F32GroupBlocks<A>;
  gemv_f32_group_passes<A, S::kGroups, S::kVectors>(rows, cols, w, n_vectors, x, x_stride, bias, y,
                                                    y_stride);
}

template <class A>
void gemv_f32_groups(std::size_t rows, std::size_t cols, const float* w, const float* x,
                     const float* bias, float* y) {
  gemv_f32_group_passes<A, F32GroupBlocks<A>::kGroupsAlone, 1>(rows, cols, w, 1, x, 0, bias, y, 0);
}

}  // namespace aft::kernels::simd
