// bf16 weights by bf16 activations on tiles of bf16 pair products: AMX's TMUL
// (isa_avx512amx.cpp), or the same instructions emulated (emulated_tiles.h) where the CPU has
// none, to test the kernel. gemv_bf16_bf16 and gemv_batch_bf16_bf16 (kernels.h) of the
// avx512amx table: one vector and a batch run the same tile products, so a sequence gets the same
// bits alone and in a batch.
//
// For up to 16 vectors at a time (N), per group of 4 weight rows (packed_weights.h), each chunk
// of 32 columns is one tile product C += A B (tdpbf16ps):
//   A: the group's packed chunk as it is, 4 rows of 16 pairs (columns j and j + 16);
//   B: the N vectors' pairs of the chunk, 16 rows (pair j) of N pairs: a vector's rounded
//      activations (round_bf16_pairs) transposed, or as they are for one vector;
//   C: 4 x N f32 sums, row = weight row, column = vector, kept in the tile over all chunks.
// Each sum is the instruction's: per pair, column j's product added, then column j + 16's, each
// rounded (products of two bf16 values are exact in f32), pair after pair, chunk after chunk.
// That order is a function of the pair of row and vector alone, whatever N, so a vector's bits do
// not depend on the vectors beside it. It is not the order of vdpbf16ps (the avx512bf16 table),
// whose lanes sum a row's columns apart and then add the lanes: the two tables agree to the
// rounding of f32 sums, not bit for bit.
//
// Three groups per pass share each load of B: tiles 0-2 (C), 3-5 (A), 6 (B).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/kernels.h"
#include "kernels/thread_scratch.h"
#include "kernels/tile_config.h"

namespace aft::kernels::simd {

// Vectors per tile product at most: the columns of B and C.
constexpr std::size_t kBf16TileVectors = 16;
// Groups of weight rows per pass.
constexpr int kBf16TileGroups = 3;

// The configuration for n vectors, at [n - 1] (computed at compile time: no inline function of
// this header is emitted in an ISA file, kernels/README.md).
constexpr std::array<TileConfig, kBf16TileVectors> bf16_tile_configs() {
  std::array<TileConfig, kBf16TileVectors> configs{};
  for (std::size_t n = 1; n <= kBf16TileVectors; ++n) {
    TileConfig& config = configs[n - 1];
    for (int g = 0; g < kBf16TileGroups; ++g) {
      config.set(g, kBf16GroupRows, n * sizeof(float));
      config.set(kBf16TileGroups + g, kBf16GroupRows, kBf16ChunkCols * sizeof(uint16_t));
    }
    config.set(2 * kBf16TileGroups, kBf16ChunkCols / 2, n * sizeof(uint32_t));
  }
  return configs;
}

// f(std::integral_constant<int, i>) for i in [0, n).
template <class F, int... I>
[[gnu::always_inline]] inline void for_each_tile(std::integer_sequence<int, I...>, F&& f) {
  (f(std::integral_constant<int, I>{}), ...);
}

// The sums of kGroups groups (group i's chunks at w + i * group_stride values) by the vectors of
// b (chunk k's B at b + k * b_chunk pairs, rows b_stride bytes apart), into c (kGroups x 4 rows
// of kBf16TileVectors floats).
template <class Tiles, int kGroups>
void bf16_tile_pass(const uint16_t* w, std::size_t group_stride, std::size_t chunks,
                    const uint32_t* b, std::size_t b_chunk, std::size_t b_stride, float* c) {
  constexpr int kB = 2 * kBf16TileGroups;
  constexpr std::size_t kChunkValues = kBf16GroupRows * kBf16ChunkCols;
  constexpr std::size_t kRowBytes = kBf16ChunkCols * sizeof(uint16_t);
  const auto groups = std::make_integer_sequence<int, kGroups>();
  for_each_tile(groups, [&](auto g) { Tiles::template zero<g>(); });
  for (std::size_t k = 0; k < chunks; ++k) {
    Tiles::template load<kB>(b + k * b_chunk, b_stride);
    for_each_tile(groups, [&](auto g) {
      constexpr int kA = kBf16TileGroups + g;
      Tiles::template load<kA>(w + g * group_stride + k * kChunkValues, kRowBytes);
      Tiles::template dpbf16ps<g, kA, kB>();
    });
  }
  for_each_tile(groups, [&](auto g) {
    Tiles::template store<g>(c + g * kBf16GroupRows * kBf16TileVectors,
                             kBf16TileVectors * sizeof(float));
  });
}

template <class Tiles>
void gemv_batch_bf16_tiles(std::size_t rows, std::size_t cols, const uint16_t* w,
                           std::size_t n_vectors, const uint16_t* xb, std::size_t x_stride,
                           const float* bias, float* y, std::size_t y_stride) {
  const std::size_t packed_cols = bf16_packed_cols(cols);
  const std::size_t chunks = packed_cols / kBf16ChunkCols;
  const std::size_t pairs = packed_cols / 2;
  const std::size_t groups = (rows + kBf16GroupRows - 1) / kBf16GroupRows;
  const std::size_t group_stride = kBf16GroupRows * packed_cols;
  static constexpr std::array<TileConfig, kBf16TileVectors> kConfigs = bf16_tile_configs();
  alignas(64) float c[kBf16TileGroups][kBf16GroupRows][kBf16TileVectors];
  for (std::size_t v0 = 0; v0 < n_vectors; v0 += kBf16TileVectors) {
    const std::size_t n = std::min(kBf16TileVectors, n_vectors - v0);
    // B: pair j of every vector side by side; one vector's pairs are that already.
    const uint32_t* b;
    if (n == 1) {
      b = reinterpret_cast<const uint32_t*>(xb + v0 * x_stride);
    } else {
      auto* transposed = static_cast<uint32_t*>(thread_scratch(pairs * n * sizeof(uint32_t)));
      for (std::size_t v = 0; v < n; ++v) {
        const uint16_t* x = xb + (v0 + v) * x_stride;
        for (std::size_t p = 0; p < pairs; ++p) {
          std::memcpy(&transposed[p * n + v], x + 2 * p, sizeof(uint32_t));
        }
      }
      b = transposed;
    }
    const std::size_t b_chunk = kBf16ChunkCols / 2 * n, b_stride = n * sizeof(uint32_t);
    Tiles::configure(kConfigs[n - 1]);
    for (std::size_t g0 = 0; g0 < groups; g0 += kBf16TileGroups) {
      const std::size_t pass = std::min<std::size_t>(kBf16TileGroups, groups - g0);
      const uint16_t* wg = w + g0 * group_stride;
      if (pass == 3) {
        bf16_tile_pass<Tiles, 3>(wg, group_stride, chunks, b, b_chunk, b_stride, &c[0][0][0]);
      } else if (pass == 2) {
        bf16_tile_pass<Tiles, 2>(wg, group_stride, chunks, b, b_chunk, b_stride, &c[0][0][0]);
      } else {
        bf16_tile_pass<Tiles, 1>(wg, group_stride, chunks, b, b_chunk, b_stride, &c[0][0][0]);
      }
      for (std::size_t g = 0; g < pass; ++g) {
        for (std::size_t i = 0; i < kBf16GroupRows; ++i) {
          const std::size_t r = (g0 + g) * kBf16GroupRows + i;
          if (r >= rows) break;
          for (std::size_t v = 0; v < n; ++v) {
            y[(v0 + v) * y_stride + r] = bias ? c[g][i][v] + bias[r] : c[g][i][v];
          }
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
