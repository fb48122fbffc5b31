// The q8_0 batch GEMV on tiles of int8 products: AMX's TMUL (isa_avx512amx.cpp), or the same
// instructions emulated (emulated_tiles.h) where the CPU has none, to test the kernel.
//
// Per group of 16 weight rows and 16 activation vectors, each block of 32 columns is one tile
// product C = A B (tdpbssd):
//   A: the 16 vectors' quants of the block, 16 rows of 32 bytes (row stride cols);
//   B: the group's packed block (packed_weights.h: 8 steps of the 16 rows' 4 quants), which is
//      the layout tdpbssd takes: K / 4 = 8 rows of 16 columns of 4 quants;
//   C: 16 x 16 exact int32 sums, row = vector, column = weight row.
// C is stored, and each vector's 16 row sums take fma(float(sums), wd * xd, acc), block after
// block: the integer sums and the float operations of gemv_groups_q8_0 (q8_0.hpp) in its order,
// so each vector gets the bits of gemv_q8_0 of the table whose float arithmetic this is (16 float
// lanes: the AVX-512 tables).
//
// Two sets of tiles (tile_config.h: the Tiles policy), used block by block in turn. On a
// Sapphire Rapids a tile product and AVX-512 arithmetic do not overlap (measured: interleaved,
// they take the sum of their times even on independent data), so a block costs its tile work plus
// its float work; four sets (C tiles 0-3) measured 0.87x. The group's weights are prefetched 4 KB
// ahead of the tile loads (tile_config.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <xsimd/xsimd.hpp>

#include "kernels/kernels.h"
#include "kernels/simd_partial.hpp"
#include "kernels/tile_config.h"

namespace aft::kernels::simd {

// Vectors per tile product: the rows of A and C.
constexpr std::size_t kQ8TileVectors = 16;

// Tiles 3 s (C: 16 vectors x 16 int32 sums), 3 s + 1 (A: 16 vectors x 32 quants) and 3 s + 2
// (B: 8 steps x 16 rows x 4 quants), for the sets s = 0, 1.
constexpr TileConfig q8_0_tile_config() {
  TileConfig config;
  for (std::size_t set = 0; set < 2; ++set) {
    config.set(3 * set, kQ8TileVectors, kQ8GroupRows * sizeof(int32_t));
    config.set(3 * set + 1, kQ8TileVectors, kQ8BlockSize);
    config.set(3 * set + 2, kQ8BlockSize / 4, kQ8GroupRows * 4);
  }
  return config;
}

// One block's sums on the tiles of set kSet: C = A B, stored to c (16 x 16 int32).
template <class Tiles, int kSet>
[[gnu::always_inline]] inline void q8_0_tile_product(const int8_t* x, std::size_t x_stride,
                                                     const int8_t* w, int32_t* c) {
  constexpr int kC = 3 * kSet, kA = kC + 1, kB = kC + 2;
  Tiles::template zero<kC>();
  Tiles::template load<kA>(x, x_stride);
  Tiles::template load<kB>(w, kQ8GroupRows * 4);
  Tiles::template dpbssd<kC, kA, kB>();
  Tiles::template store<kC>(c, kQ8GroupRows * sizeof(int32_t));
}

// acc[v] = fma(float(c[v][0, 16)), w_scales * x_scales[v * x_stride], acc[v]) for each of the 16
// vectors: one block's sums, as gemv_groups_q8_0 adds them.
template <class A>
[[gnu::always_inline]] inline void add_tile_sums(const int32_t* c, const float* w_scales,
                                                 const float* x_scales, std::size_t x_stride,
                                                 xsimd::batch<float, A>* acc) {
  using B = xsimd::batch<float, A>;
  using I = xsimd::batch<int32_t, A>;
  const B ws = B::load_unaligned(w_scales);
#pragma GCC unroll 16
  for (std::size_t v = 0; v < kQ8TileVectors; ++v) {
    acc[v] = xsimd::fma(xsimd::batch_cast<float>(I::load_aligned(c + v * kQ8GroupRows)),
                        ws * B(x_scales[v * x_stride]), acc[v]);
  }
}

// gemv_batch_q8_0 (kernels.h) for a multiple of kQ8TileVectors vectors. For each group, vector
// tiles pass in turn while the group's weights stay in cache.
template <class A, class Tiles>
void gemv_batch_q8_0_tiles(std::size_t rows, std::size_t cols, const int8_t* wq, const float* wd,
                           std::size_t n_vectors, const int8_t* xq, const float* xd,
                           const float* bias, float* y, std::size_t y_stride) {
  using B = xsimd::batch<float, A>;
  static_assert(B::size == kQ8GroupRows, "a vector's sums of a group are one float batch");
  constexpr std::size_t kGroupBytes = kQ8GroupRows * kQ8BlockSize;
  static constexpr TileConfig kConfig = q8_0_tile_config();
  const std::size_t blocks = cols / kQ8BlockSize;
  alignas(64) int32_t c[2][kQ8TileVectors * kQ8GroupRows];
  Tiles::configure(kConfig);
  for (std::size_t r = 0; r < rows; r += kQ8GroupRows) {
    const std::size_t n = std::min(kQ8GroupRows, rows - r);
    const int8_t* w = wq + r * cols;  // the group's blocks, kGroupBytes each
    const float* wscale = wd + r * blocks;
    const B bias_rows = bias ? load_lanes<A>(bias + r, n, 0.0f) : B(0.0f);
    for (std::size_t v0 = 0; v0 < n_vectors; v0 += kQ8TileVectors) {
      const int8_t* x = xq + v0 * cols;
      const float* xscale = xd + v0 * blocks;
      B acc[kQ8TileVectors];
#pragma GCC unroll 16
      for (B& a : acc) a = B(0.0f);
      std::size_t b = 0;
      for (; b + 2 <= blocks; b += 2) {
        prefetch_weights_ahead<2 * kGroupBytes>(w + b * kGroupBytes);
        q8_0_tile_product<Tiles, 0>(x + b * kQ8BlockSize, cols, w + b * kGroupBytes, c[0]);
        q8_0_tile_product<Tiles, 1>(x + (b + 1) * kQ8BlockSize, cols, w + (b + 1) * kGroupBytes,
                                    c[1]);
        add_tile_sums<A>(c[0], wscale + b * kQ8GroupRows, xscale + b, blocks, acc);
        add_tile_sums<A>(c[1], wscale + (b + 1) * kQ8GroupRows, xscale + b + 1, blocks, acc);
      }
      if (b < blocks) {
        q8_0_tile_product<Tiles, 0>(x + b * kQ8BlockSize, cols, w + b * kGroupBytes, c[0]);
        add_tile_sums<A>(c[0], wscale + b * kQ8GroupRows, xscale + b, blocks, acc);
      }
      // Whole vector stores: a scalar copy of the 16 x 16 sums took a third of a group's time
      // at 16 blocks (512 columns).
#pragma GCC unroll 16
      for (std::size_t v = 0; v < kQ8TileVectors; ++v) {
        store_lanes<A>(bias ? acc[v] + bias_rows : acc[v], y + (v0 + v) * y_stride + r, n);
      }
    }
  }
  Tiles::release();
}

}  // namespace aft::kernels::simd
