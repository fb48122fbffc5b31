// bf16 weights by bf16 activations on tiles of bf16 pair products: AMX's TMUL
// (isa_avx512amx.cpp), or the same instructions emulated (emulated_tiles.h) where the CPU has
// none, to test the kernel. gemv_bf16_bf16 and gemv_batch_bf16_bf16 (kernels.h) of the
// avx512amx table: one vector, a batch and a prompt's rows (KernelTable::bf16_batch_on_tiles) run
// the same tile products, so a sequence gets the same bits alone, in a batch and in a prompt.
//
// For up to 16 vectors at a time (M), per group of 16 weight rows (packed_weights.h), each chunk
// of 32 columns is one tile product C += A B (tdpbf16ps):
//   A: the vectors' rounded activations of the chunk as they are (round_bf16), M rows of 16 pairs;
//   B: the group's packed chunk as it is, 16 lines (pair p) of the 16 rows' pairs: 1 KB in one
//      stream;
//   C: M x 16 f32 sums, row = vector, column = weight row, kept in the tile over all chunks.
// Each sum is the instruction's, pair after pair, chunk after chunk: the SDM's pseudocode adds
// column 2p's product, then column 2p + 1's, each rounded (emulated_tiles.h does), but the
// Sapphire Rapids measured rounds otherwise (tests/quantized_kernels_test.cpp). Either way the sum
// of a (row, vector) is a function of the two alone, whatever M, so a vector's bits do not depend
// on the vectors beside it (tested on the hardware). It is not vdpbf16ps's order (the avx512bf16
// table): the two tables agree to the rounding of f32 sums, not bit for bit.
//
// Up to 16 vectors: three groups per pass share each load of A, tiles 0-2 (C), 3-5 (B), 6 (A).
// Blocks of 32 vectors (a prompt's rows): two A tiles by two groups' B, four C, so that each load
// serves two products. Each group's weights are prefetched 4 KB ahead of its tile loads
// (tile_config.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <xsimd/xsimd.hpp>

#include "kernels/kernels.h"
#include "kernels/simd_partial.hpp"
#include "kernels/tile_config.h"

namespace aft::kernels::simd {

// Vectors per tile product at most: the rows of A and C.
constexpr std::size_t kBf16TileVectors = 16;
// Groups of weight rows per pass.
constexpr int kBf16TileGroups = 3;
// A tile row: 16 pairs of bf16 (A, B) or 16 floats (C).
constexpr std::size_t kBf16TileRowBytes = 64;

// The configurations for m vectors, at of[m - 1]: computed at compile time, and a built-in array,
// so that no inline function (std::array's operator[] where a build does not inline it) is
// emitted in an ISA file (kernels/README.md).
struct Bf16TileConfigs {
  TileConfig of[kBf16TileVectors];
};

constexpr Bf16TileConfigs bf16_tile_configs() {
  Bf16TileConfigs configs{};
  for (std::size_t m = 1; m <= kBf16TileVectors; ++m) {
    TileConfig& config = configs.of[m - 1];
    for (int g = 0; g < kBf16TileGroups; ++g) {
      config.set(g, m, kBf16TileRowBytes);
      config.set(kBf16TileGroups + g, kBf16ChunkCols / 2, kBf16TileRowBytes);
    }
    config.set(2 * kBf16TileGroups, m, kBf16TileRowBytes);
  }
  return configs;
}

// f(std::integral_constant<int, i>) for i in [0, n).
template <class F, int... I>
[[gnu::always_inline]] inline void for_each_tile(std::integer_sequence<int, I...>, F&& f) {
  (f(std::integral_constant<int, I>{}), ...);
}

// The sums of kGroups groups (group i's chunks at w + i * group_stride values) by the vectors at
// xb (rows x_bytes apart), into c (kGroups x kBf16TileVectors rows of 16 floats).
template <class Tiles, int kGroups>
void bf16_tile_pass(const uint16_t* w, std::size_t group_stride, std::size_t chunks,
                    const uint16_t* xb, std::size_t x_bytes, float* c) {
  constexpr int kA = 2 * kBf16TileGroups;
  constexpr std::size_t kChunkValues = kBf16GroupRows * kBf16ChunkCols;
  const auto groups = std::make_integer_sequence<int, kGroups>();
  for_each_tile(groups, [&](auto g) { Tiles::template zero<g>(); });
  for (std::size_t k = 0; k < chunks; ++k) {
    Tiles::template load<kA>(xb + k * kBf16ChunkCols, x_bytes);
    for_each_tile(groups, [&](auto g) {
      constexpr int kB = kBf16TileGroups + g;
      const uint16_t* chunk = w + g * group_stride + k * kChunkValues;
      prefetch_weights_ahead<kChunkValues * sizeof(uint16_t)>(chunk);
      Tiles::template load<kB>(chunk, kBf16TileRowBytes);
      Tiles::template dpbf16ps<g, kA, kB>();
    });
  }
  for_each_tile(groups, [&](auto g) {
    Tiles::template store<g>(c + g * kBf16TileVectors * kBf16GroupRows, kBf16TileRowBytes);
  });
}

// The sums of kGroups groups by 32 vectors (two A tiles, 16 vectors each), into c: tile
// (half h, group g) at c + (h * kGroups + g) * kTileFloats. Tiles 0-3 (C), 4-5 (A), 6-7 (B):
// each load of A serves kGroups products and each load of B two.
template <class Tiles, int kGroups>
void bf16_tile_block(const uint16_t* w, std::size_t group_stride, std::size_t chunks,
                     const uint16_t* xb, std::size_t x_bytes, float* c) {
  constexpr int kA = 4, kB = 6;
  constexpr std::size_t kChunkValues = kBf16GroupRows * kBf16ChunkCols;
  constexpr std::size_t kTileFloats = kBf16TileVectors * kBf16GroupRows;
  const auto groups = std::make_integer_sequence<int, kGroups>();
  const uint16_t* xb_half = xb + kBf16TileVectors * x_bytes / sizeof(uint16_t);
  for_each_tile(std::make_integer_sequence<int, 2 * kGroups>(),
                [&](auto t) { Tiles::template zero<t>(); });
  for (std::size_t k = 0; k < chunks; ++k) {
    Tiles::template load<kA>(xb + k * kBf16ChunkCols, x_bytes);
    Tiles::template load<kA + 1>(xb_half + k * kBf16ChunkCols, x_bytes);
    for_each_tile(groups, [&](auto g) {
      const uint16_t* chunk = w + g * group_stride + k * kChunkValues;
      prefetch_weights_ahead<kChunkValues * sizeof(uint16_t)>(chunk);
      Tiles::template load<kB + g>(chunk, kBf16TileRowBytes);
      Tiles::template dpbf16ps<g, kA, kB + g>();
      Tiles::template dpbf16ps<kGroups + g, kA + 1, kB + g>();
    });
  }
  for_each_tile(std::make_integer_sequence<int, 2 * kGroups>(),
                [&](auto t) { Tiles::template store<t>(c + t * kTileFloats, kBf16TileRowBytes); });
}

constexpr TileConfig bf16_block_tile_config() {
  TileConfig config{};
  for (int t = 0; t < kTiles; ++t) config.set(t, kTileRows, kBf16TileRowBytes);
  return config;
}

// y rows [r0, r0 + n) of the m vectors whose sums of a group are c (m rows of 16 floats), plus
// the bias: whole vector stores (a scalar copy took a third of q8_0's kernel, q8_0_tiles.hpp).
template <class A>
[[gnu::always_inline]] inline void store_group_sums(const float* c, std::size_t m, std::size_t r0,
                                                    std::size_t n, const float* bias, float* y,
                                                    std::size_t y_stride) {
  using B = xsimd::batch<float, A>;
  static_assert(B::size == kBf16GroupRows, "a vector's sums of a group are one float batch");
  const B bias_rows = bias ? load_lanes<A>(bias + r0, n, 0.0f) : B(0.0f);
  for (std::size_t v = 0; v < m; ++v) {
    const B sums = B::load_aligned(c + v * kBf16GroupRows);
    store_lanes<A>(bias ? sums + bias_rows : sums, y + v * y_stride + r0, n);
  }
}

// gemv_batch_bf16_bf16 (kernels.h): blocks of 32 vectors by pairs of groups (a prompt's rows),
// then the rest 16 vectors at a time by three groups. Every sum is the same chain of tile
// products, so the bits do not depend on which way a vector went.
template <class A, class Tiles>
void gemv_batch_bf16_tiles(std::size_t rows, std::size_t cols, const uint16_t* w,
                           std::size_t n_vectors, const uint16_t* xb, std::size_t x_stride,
                           const float* bias, float* y, std::size_t y_stride) {
  const std::size_t packed_cols = bf16_packed_cols(cols);
  const std::size_t chunks = packed_cols / kBf16ChunkCols;
  const std::size_t groups = (rows + kBf16GroupRows - 1) / kBf16GroupRows;
  const std::size_t group_stride = kBf16GroupRows * packed_cols;
  const std::size_t x_bytes = x_stride * sizeof(uint16_t);
  constexpr std::size_t kTileFloats = kBf16TileVectors * kBf16GroupRows;
  constexpr std::size_t kBlockVectors = 2 * kBf16TileVectors;
  alignas(64) float c[kTiles / 2][kTileFloats];
  std::size_t v0 = 0;
  if (n_vectors >= kBlockVectors) {
    static constexpr TileConfig kBlockConfig = bf16_block_tile_config();
    Tiles::configure(kBlockConfig);
    for (; v0 + kBlockVectors <= n_vectors; v0 += kBlockVectors) {
      const uint16_t* x = xb + v0 * x_stride;
      for (std::size_t g0 = 0; g0 < groups; g0 += 2) {
        const int pass = groups - g0 >= 2 ? 2 : 1;
        if (pass == 2) {
          bf16_tile_block<Tiles, 2>(w + g0 * group_stride, group_stride, chunks, x, x_bytes,
                                    &c[0][0]);
        } else {
          bf16_tile_block<Tiles, 1>(w + g0 * group_stride, group_stride, chunks, x, x_bytes,
                                    &c[0][0]);
        }
        for (int h = 0; h < 2; ++h) {
          for (int g = 0; g < pass; ++g) {
            const std::size_t r0 = (g0 + g) * kBf16GroupRows;
            store_group_sums<A>(c[h * pass + g], kBf16TileVectors, r0,
                                std::min(kBf16GroupRows, rows - r0), bias,
                                y + (v0 + h * kBf16TileVectors) * y_stride, y_stride);
          }
        }
      }
    }
    Tiles::release();
  }
  static constexpr Bf16TileConfigs kConfigs = bf16_tile_configs();
  for (; v0 < n_vectors; v0 += kBf16TileVectors) {
    const std::size_t m = std::min(kBf16TileVectors, n_vectors - v0);
    const uint16_t* x = xb + v0 * x_stride;
    Tiles::configure(kConfigs.of[m - 1]);
    for (std::size_t g0 = 0; g0 < groups; g0 += kBf16TileGroups) {
      const std::size_t pass = std::min<std::size_t>(kBf16TileGroups, groups - g0);
      const uint16_t* wg = w + g0 * group_stride;
      if (pass == 3) {
        bf16_tile_pass<Tiles, 3>(wg, group_stride, chunks, x, x_bytes, &c[0][0]);
      } else if (pass == 2) {
        bf16_tile_pass<Tiles, 2>(wg, group_stride, chunks, x, x_bytes, &c[0][0]);
      } else {
        bf16_tile_pass<Tiles, 1>(wg, group_stride, chunks, x, x_bytes, &c[0][0]);
      }
      for (std::size_t g = 0; g < pass; ++g) {
        const std::size_t r0 = (g0 + g) * kBf16GroupRows;
        store_group_sums<A>(c[g], m, r0, std::min(kBf16GroupRows, rows - r0), bias,
                            y + v0 * y_stride, y_stride);
      }
    }
    Tiles::release();
  }
}

template <class A, class Tiles>
void gemv_bf16_tiles(std::size_t rows, std::size_t cols, const uint16_t* w, const uint16_t* xb,
                     const float* bias, float* y) {
  gemv_batch_bf16_tiles<A, Tiles>(rows, cols, w, 1, xb, 0, bias, y, 0);
}

}  // namespace aft::kernels::simd
