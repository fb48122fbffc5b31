// q8_0 weights and activations (docs/format.md): quantization, and the GEMV of packed q8_0 weights
// (packed_weights.h) by q8_0 activations, for one vector (gemv_q8_0) or several (gemv_batch_q8_0:
// a batch's tokens, or a prompt's).
//
// A batch's GEMV takes Q8GroupDot<A>::kGroups groups of 16 rows per pass, so that each block of
// activation quants is prepared once for all of them; one or two vectors take a group per pass. Per
// block, the exact integer sums of the 16 rows land in the lanes of int32 batches, one lane per
// row; a float batch per 16 rows then takes fma(float(sums), wd * xd, acc), block after block, and
// holds the rows' results at the end: the order of the scalar loop, the same for every pass shape,
// so gemv_batch_q8_0 (panels of rows that stay in L1 while every vector passes) gives each vector
// the bits of gemv_q8_0. Single-threaded.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include <xsimd/xsimd.hpp>

#include "kernels/kernels.h"
#include "kernels/q8_group_dot.hpp"
#include "kernels/q8_quantize_lanes.hpp"
#include "kernels/simd_prefetch.hpp"
#include "kernels/thread_scratch.h"

namespace aft::kernels::simd {

template <class A>
using Q8Prefetch = Prefetch<A, Q8GroupDot<A>::kPrefetchTo>;

// Per block: the largest magnitude (an exact max, in any order), one IEEE division for the scale
// and one per value; rounding to nearest even (cvtps2dq / fcvtns) after clamping, which commutes
// with it for integer bounds. Bit-identical to the scalar reference.
template <class A>
void quantize_q8_0(std::size_t n, const float* x, int8_t* q, float* d) {
  using B = xsimd::batch<float, A>;
  using I = xsimd::batch<int32_t, A>;
  constexpr std::size_t L = B::size;
  static_assert(kQ8BlockSize % L == 0, "a block is whole batches");
  for (std::size_t b = 0; b < n / kQ8BlockSize; ++b) {
    const float* xb = x + b * kQ8BlockSize;
    int8_t* qb = q + b * kQ8BlockSize;
    B top = xsimd::abs(B::load_unaligned(xb));
    for (std::size_t i = L; i < kQ8BlockSize; i += L) {
      top = xsimd::max(top, xsimd::abs(B::load_unaligned(xb + i)));
    }
    const float amax = Q8QuantizeLanes<A>::max_lane(top);
    const float scale = amax / 127.0f;
    d[b] = scale;
    if (scale == 0.0f) {
      for (std::size_t i = 0; i < kQ8BlockSize; ++i) qb[i] = 0;
      continue;
    }
    for (std::size_t i = 0; i < kQ8BlockSize; i += L) {
      const B v = B::load_unaligned(xb + i) / B(scale);
      const I rounded = xsimd::nearbyint_as_int(xsimd::min(xsimd::max(v, B(-127.0f)), B(127.0f)));
      Q8QuantizeLanes<A>::store_int8(rounded, qb + i);
    }
  }
}

// G groups from the group at wq / wd, for one activation vector; rows [0, rows) of them are
// written (rows <= 16 G: the last group may be padding).
template <class A, std::size_t G>
[[gnu::always_inline]] inline void gemv_groups_q8_0(std::size_t blocks, const int8_t* wq,
                                                    const float* wd, const int8_t* xq,
                                                    const float* xd, const float* bias,
                                                    std::size_t rows, float* y,
                                                    Q8Prefetch<A> quants, Q8Prefetch<A> scales) {
  using B = xsimd::batch<float, A>;
  using I = xsimd::batch<int32_t, A>;
  using D = Q8GroupDot<A>;
  constexpr std::size_t P = D::kParts;
  constexpr std::size_t L = B::size;
  static_assert(P * L == kQ8GroupRows, "a group is kParts batches");
  constexpr std::size_t kGroupBytes = kQ8GroupRows * kQ8BlockSize;
  B acc[G][P];
  for (std::size_t g = 0; g < G; ++g) {
    for (std::size_t p = 0; p < P; ++p) acc[g][p] = B(0.0f);
  }
  for (std::size_t b = 0; b < blocks; ++b) {
    const typename D::X x = D::prepare(xq + b * kQ8BlockSize);
    quants.step();
    scales.step();
    const B x_scale(xd[b]);
    for (std::size_t g = 0; g < G; ++g) {
      I sums[P];
      D::dot(wq + (g * blocks + b) * kGroupBytes, x, sums);
      const float* scales = wd + (g * blocks + b) * kQ8GroupRows;
      for (std::size_t p = 0; p < P; ++p) {
        acc[g][p] = xsimd::fma(xsimd::batch_cast<float>(sums[p]),
                               B::load_unaligned(scales + p * L) * x_scale, acc[g][p]);
      }
    }
  }
  alignas(A::alignment()) float out[G * kQ8GroupRows];
  for (std::size_t g = 0; g < G; ++g) {
    for (std::size_t p = 0; p < P; ++p) acc[g][p].store_aligned(out + g * kQ8GroupRows + p * L);
  }
  for (std::size_t r = 0; r < rows; ++r) y[r] = bias ? out[r] + bias[r] : out[r];
}

// Whether the calls of a pass of G groups share their blocks' weight sums (Q8GroupDot::kWeightSums;
// the first call keeps them, the later ones are given them): passes of several groups are those
// of more than kQ8OneGroupVectors vectors (gemv_batch_q8_0); a pass of one group, of one or two
// vectors or the last rows, has each call take them.
template <class A, std::size_t G>
constexpr bool kPassWeightSums = (Q8GroupDot<A>::kWeightSums && G > 1);

// gemv_groups_q8_0 for V vectors at once (x[v], xd[v], y[v], extras[v]: Q8GroupDot's extra of
// each of vector v's blocks; 2 <= V <= D::kVectors, or 1 where D::kAloneByGroups; weight_sums:
// the pass's, block b's group g at (b G + g) 16, used as kSums says): each weight register serves
// them all, and
// each (row, vector) gets the same integer sums and the same fma per block, in the same order: the
// bits of gemv_groups_q8_0 for each vector. Every loop over the accumulators is unrolled and they
// leave through one array: a loop left rolled indexes them by a variable, and GCC then keeps them
// on the stack (Q8GroupDot<avx512bw>::dot_groups).
template <class A, std::size_t G, std::size_t V, WeightSums kSums = WeightSums::kTake>
[[gnu::always_inline]] inline void gemv_groups_q8_0_vectors(
    std::size_t blocks, const int8_t* wq, const float* wd, const int8_t* const* xq,
    const float* const* xd, const typename Q8GroupDot<A>::Extra* const* extras,
    int32_t* weight_sums, const float* bias, std::size_t rows, float* const* y,
    Q8Prefetch<A> quants, Q8Prefetch<A> scales) {
  using B = xsimd::batch<float, A>;
  using I = xsimd::batch<int32_t, A>;
  using D = Q8GroupDot<A>;
  constexpr std::size_t P = D::kParts;
  constexpr std::size_t L = B::size;
  constexpr std::size_t kGroupBytes = kQ8GroupRows * kQ8BlockSize;
  B acc[G * P][V];
#pragma GCC unroll 16
  for (std::size_t i = 0; i < G * P; ++i) {
#pragma GCC unroll 16
    for (std::size_t v = 0; v < V; ++v) acc[i][v] = B(0.0f);
  }
  for (std::size_t b = 0; b < blocks; ++b) {
    const int8_t* x[V];
    const typename D::Extra* block_extras[V];
#pragma GCC unroll 16
    for (std::size_t v = 0; v < V; ++v) {
      x[v] = xq[v] + b * kQ8BlockSize;
      block_extras[v] = extras[v] + b;
    }
    quants.step();
    scales.step();
    I sums[G * P][V];
    if constexpr (D::kWeightSums) {
      // A pass that takes the sums in every call has no table (weight_sums null).
      int32_t* block_sums =
          kSums == WeightSums::kTake ? nullptr : weight_sums + b * G * kQ8GroupRows;
      D::template dot_groups<G, V, kSums>(wq + b * kGroupBytes, blocks * kGroupBytes, x,
                                          block_extras, block_sums, sums);
    } else {
      D::template dot_groups<G, V>(wq + b * kGroupBytes, blocks * kGroupBytes, x, block_extras,
                                   sums);
    }
#pragma GCC unroll 16
    for (std::size_t i = 0; i < G * P; ++i) {
      const B w_scales = B::load_unaligned(wd + (i / P * blocks + b) * kQ8GroupRows + i % P * L);
#pragma GCC unroll 16
      for (std::size_t v = 0; v < V; ++v) {
        acc[i][v] =
            xsimd::fma(xsimd::batch_cast<float>(sums[i][v]), w_scales * B(xd[v][b]), acc[i][v]);
      }
    }
  }
  alignas(A::alignment()) float out[V][G * kQ8GroupRows];
#pragma GCC unroll 16
  for (std::size_t i = 0; i < G * P; ++i) {
#pragma GCC unroll 16
    for (std::size_t v = 0; v < V; ++v) acc[i][v].store_aligned(out[v] + i * L);
  }
  for (std::size_t v = 0; v < V; ++v) {
    for (std::size_t r = 0; r < rows; ++r) y[v][r] = bias ? out[v][r] + bias[r] : out[v][r];
  }
}

// gemv_groups_q8_0_vectors for `count` vectors, 2 <= count <= V: the instance of that count.
template <class A, std::size_t G, std::size_t V, WeightSums kSums>
[[gnu::always_inline]] inline void gemv_groups_q8_0_count(
    std::size_t count, std::size_t blocks, const int8_t* wq, const float* wd,
    const int8_t* const* xq, const float* const* xd,
    const typename Q8GroupDot<A>::Extra* const* extras, int32_t* weight_sums, const float* bias,
    std::size_t rows, float* const* y, Q8Prefetch<A> quants, Q8Prefetch<A> scales) {
  if (count == V) {
    gemv_groups_q8_0_vectors<A, G, V, kSums>(blocks, wq, wd, xq, xd, extras, weight_sums, bias,
                                             rows, y, quants, scales);
  } else if constexpr (V > 2) {
    gemv_groups_q8_0_count<A, G, V - 1, kSums>(count, blocks, wq, wd, xq, xd, extras, weight_sums,
                                               bias, rows, y, quants, scales);
  }
}

// Passes of G groups, then group by group, each pass for every vector while its weights stay in
// cache (kVectors vectors at once where the architecture takes several, then the 2 or more left
// together); meanwhile each vector asks for a share of the next pass's weights (one vector alone:
// where kPrefetchAlone). A row's result does not depend on the rows or vectors computed with it,
// so each vector of a batch gets the bits of gemv_q8_0. prefetch_one: whether one vector alone
// asks for the next pass too.
template <class A, std::size_t G>
void gemv_passes_q8_0(std::size_t rows, std::size_t cols, const int8_t* wq, const float* wd,
                      std::size_t n_vectors, const int8_t* xq, const float* xd, const float* bias,
                      float* y, std::size_t y_stride, bool prefetch_one) {
  constexpr std::size_t kPassRows = G * kQ8GroupRows;
  const std::size_t blocks = cols / kQ8BlockSize;
  // A full pass takes its vectors kVectors at a time, then the rest: together where they are 2 or
  // more, else alone. That is `calls` calls, each asking for its share of the next pass (call
  // `part`). Passes are contiguous: the next one's quants and scales start where this one's end.
  constexpr std::size_t V = Q8GroupDot<A>::kVectors;
  const std::size_t together = V > 1 ? n_vectors / V : 0;
  const std::size_t rest = n_vectors - together * V;
  const std::size_t calls = together + (V > 1 && rest >= 2 ? 1 : rest);
  const bool prefetch = n_vectors > 1 || prefetch_one;
  const auto shares = [&](std::size_t r, std::size_t part, std::size_t parts,
                          std::size_t pass_rows) {
    const std::size_t next_rows =
        prefetch ? std::min(kPassRows, rows - std::min(rows, r + pass_rows)) : 0;
    return std::make_pair(
        Q8Prefetch<A>::part_of(wq + (r + pass_rows) * cols, next_rows * cols, part, parts, blocks),
        Q8Prefetch<A>::part_of(wd + (r + pass_rows) * blocks, next_rows * blocks * sizeof(float),
                               part, parts, blocks));
  };
  // Each vector's blocks prepared for dot_groups (Q8GroupDot::extra), once for every pass, and
  // after them, where kPassWeightSums, room for a pass's weight sums.
  int32_t* weight_sums = nullptr;
  const auto extras = [&] {
    if constexpr (V > 1) {
      using E = typename Q8GroupDot<A>::Extra;
      E* table = nullptr;
      if (Q8GroupDot<A>::kAloneByGroups || (n_vectors >= 2 && rows >= kPassRows)) {
        const std::size_t extra_bytes = (n_vectors * blocks * sizeof(E) + 63) / 64 * 64;
        const std::size_t sums_bytes =
            kPassWeightSums<A, G> ? blocks * kPassRows * sizeof(int32_t) : 0;
        auto* scratch = static_cast<unsigned char*>(thread_scratch(extra_bytes + sums_bytes));
        table = reinterpret_cast<E*>(scratch);
        if (sums_bytes != 0) weight_sums = reinterpret_cast<int32_t*>(scratch + extra_bytes);
        for (std::size_t v = 0; v < n_vectors; ++v) {
          for (std::size_t b = 0; b < blocks; ++b) {
            table[v * blocks + b] = Q8GroupDot<A>::extra(xq + v * cols + b * kQ8BlockSize);
          }
        }
      }
      return static_cast<const E*>(table);
    } else {
      return nullptr;
    }
  }();
  // Vector v alone on G groups from row r, n of their rows written.
  const auto alone = [&](auto groups, std::size_t r, std::size_t v, std::size_t n, Q8Prefetch<A> pq,
                         Q8Prefetch<A> pd) {
    constexpr std::size_t kGroups = decltype(groups)::value;
    const float* b = bias ? bias + r : nullptr;
    if constexpr (Q8GroupDot<A>::kAloneByGroups) {
      const int8_t* x[1] = {xq + v * cols};
      const float* d[1] = {xd + v * blocks};
      const typename Q8GroupDot<A>::Extra* e[1] = {extras + v * blocks};
      float* out[1] = {y + v * y_stride + r};
      // In a pass of several groups, after its first call.
      constexpr WeightSums kSums =
          kPassWeightSums<A, kGroups> ? WeightSums::kGiven : WeightSums::kTake;
      gemv_groups_q8_0_vectors<A, kGroups, 1, kSums>(blocks, wq + r * cols, wd + r * blocks, x, d,
                                                     e, weight_sums, b, n, out, pq, pd);
    } else {
      gemv_groups_q8_0<A, kGroups>(blocks, wq + r * cols, wd + r * blocks, xq + v * cols,
                                   xd + v * blocks, b, n, y + v * y_stride + r, pq, pd);
    }
  };
  std::size_t r = 0;
  for (; r + kPassRows <= rows; r += kPassRows) {
    std::size_t v = 0;
    if constexpr (V > 1) {
      while (n_vectors - v >= 2) {
        const std::size_t count = std::min(V, n_vectors - v);
        // A pair, not a structured binding: a lambda below uses it (C++17).
        const auto prefetch_share = shares(r, v / V, calls, kPassRows);
        const int8_t* x[V];
        const float* d[V];
        const typename Q8GroupDot<A>::Extra* e[V];
        float* out[V];
        for (std::size_t i = 0; i < count; ++i) {
          x[i] = xq + (v + i) * cols;
          d[i] = xd + (v + i) * blocks;
          e[i] = extras + (v + i) * blocks;
          out[i] = y + (v + i) * y_stride + r;
        }
        const auto call = [&](auto sums) {
          gemv_groups_q8_0_count<A, G, V, decltype(sums)::value>(
              count, blocks, wq + r * cols, wd + r * blocks, x, d, e, weight_sums,
              bias ? bias + r : nullptr, kPassRows, out, prefetch_share.first,
              prefetch_share.second);
        };
        using Sums = WeightSums;
        if (!kPassWeightSums<A, G>) {
          call(std::integral_constant<Sums, Sums::kTake>{});
        } else if (v == 0) {
          call(std::integral_constant<Sums, Sums::kTakeAndKeep>{});
        } else {
          call(std::integral_constant<Sums, Sums::kGiven>{});
        }
        v += count;
      }
    }
    for (; v < n_vectors; ++v) {
      const auto [pq, pd] = shares(r, v / V, calls, kPassRows);
      alone(std::integral_constant<std::size_t, G>{}, r, v, kPassRows, pq, pd);
    }
  }
  for (; r < rows; r += kQ8GroupRows) {
    const std::size_t n = rows - r < kQ8GroupRows ? rows - r : kQ8GroupRows;
    for (std::size_t v = 0; v < n_vectors; ++v) {
      const auto [pq, pd] = shares(r, v, n_vectors, kQ8GroupRows);
      alone(std::integral_constant<std::size_t, 1>{}, r, v, n, pq, pd);
    }
  }
}

// Up to this many vectors a pass is one group: each vector then reads one stream of quants and
// one of scales, which the hardware prefetchers follow at nearly the read bandwidth; more vectors
// do enough work per weight that passes of kGroups groups (each prepared block of x serving them
// all) pay. Measured on a Zen 4 (aft-gemv-bench 2048 512, weights from memory, one vector): 21
// GB/s in passes of one group against 15 in passes of 4 (VNNI); enwik8 q8_0 decoded 12-14% faster
// on one thread. A row's sums are the same in either pass: the same bits.
constexpr std::size_t kQ8OneGroupVectors = 2;

// kPrefetchOne: the table's choice (Q8GroupDot::kPrefetchAlone), unless it depends on the CPU
// (isa_avx512vnni.cpp); either instance calls the same passes.
template <class A, bool kPrefetchOne = Q8GroupDot<A>::kPrefetchAlone>
void gemv_batch_q8_0(std::size_t rows, std::size_t cols, const int8_t* wq, const float* wd,
                     std::size_t n_vectors, const int8_t* xq, const float* xd, const float* bias,
                     float* y, std::size_t y_stride) {
  if (n_vectors <= kQ8OneGroupVectors) {
    gemv_passes_q8_0<A, 1>(rows, cols, wq, wd, n_vectors, xq, xd, bias, y, y_stride, kPrefetchOne);
  } else {
    gemv_passes_q8_0<A, Q8GroupDot<A>::kGroups>(rows, cols, wq, wd, n_vectors, xq, xd, bias, y,
                                                y_stride, kPrefetchOne);
  }
}

template <class A, bool kPrefetchOne = Q8GroupDot<A>::kPrefetchAlone>
void gemv_q8_0(std::size_t rows, std::size_t cols, const int8_t* wq, const float* wd,
               const int8_t* xq, const float* xd, const float* bias, float* y) {
  gemv_batch_q8_0<A, kPrefetchOne>(rows, cols, wq, wd, 1, xq, xd, bias, y, 0);
}

}  // namespace aft::kernels::simd
