// bf16 weights by bf16 activations on tiles of bf16 pair products: AMX's TMUL
// (isa_avx512amx.cpp), or the same instructions emulated (emulated_tiles.h) where the CPU has
// none, to test the kernel. gemv_bf16_bf16 and gemv_batch_bf16_bf16 (kernels.h) of the
// avx512amx table: one vector and a batch run the same tile products, so a sequence gets the same
// bits alone and in a batch.
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
// Three groups per pass share each load of A: tiles 0-2 (C), 3-5 (B), 6 (A). Each group's
// weights are prefetched 4 KB ahead of its tile loads (tile_config.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "kernels/kernels.h"
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

template <class Tiles>
void gemv_batch_bf16_tiles(std::size_t rows, std::size_t cols, const uint16_t* w,
                           std::size_t n_vectors, const uint16_t* xb, std::size_t x_stride,
                           const float* bias, float* y, std::size_t y_stride) {
  const std::size_t packed_cols = bf16_packed_cols(cols);
  const std::size_t chunks = packed_cols / kBf16ChunkCols;
  const std::size_t groups = (rows + kBf16GroupRows - 1) / kBf16GroupRows;
  const std::size_t group_stride = kBf16GroupRows * packed_cols;
  const std::size_t x_bytes = x_stride * sizeof(uint16_t);
  static constexpr Bf16TileConfigs kConfigs = bf16_tile_configs();
  alignas(64) float c[kBf16TileGroups][kBf16TileVectors][kBf16GroupRows];
  for (std::size_t v0 = 0; v0 < n_vectors; v0 += kBf16TileVectors) {
    const std::size_t m = std::min(kBf16TileVectors, n_vectors - v0);
    const uint16_t* x = xb + v0 * x_stride;
    Tiles::configure(kConfigs.of[m - 1]);
    for (std::size_t g0 = 0; g0 < groups; g0 += kBf16TileGroups) {
      const std::size_t pass = std::min<std::size_t>(kBf16TileGroups, groups - g0);
      const uint16_t* wg = w + g0 * group_stride;
      if (pass == 3) {
        bf16_tile_pass<Tiles, 3>(wg, group_stride, chunks, x, x_bytes, &c[0][0][0]);
      } else if (pass == 2) {
        bf16_tile_pass<Tiles, 2>(wg, group_stride, chunks, x, x_bytes, &c[0][0][0]);
      } else {
        bf16_tile_pass<Tiles, 1>(wg, group_stride, chunks, x, x_bytes, &c[0][0][0]);
      }
      for (std::size_t g = 0; g < pass; ++g) {
        const std::size_t r0 = (g0 + g) * kBf16GroupRows;
        const std::size_t n = std::min(kBf16GroupRows, rows - r0);
        for (std::size_t v = 0; v < m; ++v) {
          float* out = y + (v0 + v) * y_stride + r0;
          for (std::size_t i = 0; i < n; ++i)
            out[i] = bias ? c[g][v][i] + bias[r0 + i] : c[g][v][i];
        }
      }
    }
    Tiles::release();
  }
}

template <class Tiles>
void gemv_bf16_tiles(std::size_t rows, std::size_t cols, const uint16_t* w, const uint16_t* xb,
                     const float* bias, float* y) {
  gemv_batch_bf16_tiles<Tiles>(rows, cols, w, 1, xb, 0, bias, y, 0);
}

}  // namespace aft::kernels::simd
