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
// serves two products; the block's activations packed in tile order, a slab of weight rows and
// 16 chunks at a time (kBf16PromptSlabBytes, kBf16PromptChunks), so that A is read from L1 and B
// from L2; each pair of groups stores its sums while the next pair's products run. The sums
// wait in memory between blocks of chunks: a tile store and load of floats changes no bit. Each
// group's weights are prefetched 4 KB ahead of its tile loads (tile_config.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <xsimd/xsimd.hpp>

#include "kernels/kernels.h"
#include "kernels/simd_partial.hpp"
#include "kernels/thread_scratch.h"
#include "kernels/tile_config.h"

namespace aft::kernels::simd {

// Vectors per tile product at most: the rows of A and C.
constexpr std::size_t kBf16TileVectors = 16;
// Groups of weight rows per pass.
constexpr int kBf16TileGroups = 3;
// A tile row: 16 pairs of bf16 (A, B) or 16 floats (C).
constexpr std::size_t kBf16TileRowBytes = 64;
// A prompt's blocks of 32 vectors pass over the weights a slab of rows at a time, so that a
// slab read from memory once serves every block from L2 (Sapphire Rapids: 2 MB a core), and over
// each slab 16 chunks at a time: the block's 16 chunks, packed (32 KB), stay in L1 (48 KB) while
// the slab's groups stream past them. The sums of a block's groups wait in the thread's scratch
// between the chunks.
constexpr std::size_t kBf16PromptSlabBytes = std::size_t{1} << 20;
constexpr std::size_t kBf16PromptChunks = 16;

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

// The sums of kGroups groups by 32 vectors over `chunks` chunks, added to c (zeroed first when
// `first`): tile (half h, group g) at c + (h * kGroups + g) * kTileFloats. The vectors' chunks
// are packed at a, chunk after chunk, each two tiles of 16 rows of 64 bytes (pack_prompt_block).
// Tiles 0-3 (C), 4-5 (A), 6-7 (B): each load of A serves kGroups products and each load of B two.
template <class Tiles, int kGroups>
void bf16_tile_block(const uint16_t* w, std::size_t group_stride, std::size_t chunks,
                     const uint16_t* a, bool first, float* c) {
  constexpr int kA = 4, kB = 6;
  constexpr std::size_t kChunkValues = kBf16GroupRows * kBf16ChunkCols;
  constexpr std::size_t kTileFloats = kBf16TileVectors * kBf16GroupRows;
  const auto c_tiles = std::make_integer_sequence<int, 2 * kGroups>();
  if (first) {
    for_each_tile(c_tiles, [&](auto t) { Tiles::template zero<t>(); });
  } else {
    for_each_tile(c_tiles,
                  [&](auto t) { Tiles::template load<t>(c + t * kTileFloats, kBf16TileRowBytes); });
  }
  for (std::size_t k = 0; k < chunks; ++k) {
    const uint16_t* a_chunk = a + k * 2 * kChunkValues;
    const uint16_t* chunk = w + k * kChunkValues;
    prefetch_weights_ahead<kChunkValues * sizeof(uint16_t)>(chunk);
    Tiles::template load<kA>(a_chunk, kBf16TileRowBytes);
    Tiles::template load<kB>(chunk, kBf16TileRowBytes);
    Tiles::template dpbf16ps<0, kA, kB>();
    if constexpr (kGroups == 2) {
      prefetch_weights_ahead<kChunkValues * sizeof(uint16_t)>(chunk + group_stride);
      Tiles::template load<kB + 1>(chunk + group_stride, kBf16TileRowBytes);
      Tiles::template dpbf16ps<1, kA, kB + 1>();
    }
    Tiles::template load<kA + 1>(a_chunk + kChunkValues, kBf16TileRowBytes);
    Tiles::template dpbf16ps<kGroups, kA + 1, kB>();
    if constexpr (kGroups == 2) Tiles::template dpbf16ps<3, kA + 1, kB + 1>();
  }
  for_each_tile(c_tiles,
                [&](auto t) { Tiles::template store<t>(c + t * kTileFloats, kBf16TileRowBytes); });
}

// Chunks [k0, k0 + chunks) of 32 vectors (rows x_stride values apart at xb) into a in tile order:
// per chunk the first 16 vectors' 64 bytes, then the other 16's, so that the block's tile loads
// read contiguous lines of L1 rather than 16 rows kilobytes apart. A chunk of a vector is one
// batch of A.
template <class A>
void pack_prompt_block(const uint16_t* xb, std::size_t x_stride, std::size_t k0, std::size_t chunks,
                       uint16_t* a) {
  using Chunk = xsimd::batch<uint16_t, A>;
  static_assert(Chunk::size == kBf16ChunkCols, "a vector's chunk is one batch");
  constexpr std::size_t kVectors = 2 * kBf16TileVectors;
  for (std::size_t v = 0; v < kVectors; ++v) {
    const uint16_t* row = xb + v * x_stride + k0 * kBf16ChunkCols;
    uint16_t* to = a + (v / kBf16TileVectors) * kBf16TileVectors * kBf16ChunkCols +
                   (v % kBf16TileVectors) * kBf16ChunkCols;
    for (std::size_t k = 0; k < chunks; ++k) {
      Chunk::load_unaligned(row + k * kBf16ChunkCols)
          .store_aligned(to + k * kVectors * kBf16ChunkCols);
    }
  }
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

// Vectors [v0, n_vectors) 16 at a time by three groups (bf16_tile_pass), over groups [g0, g1) of
// the weights at w (group g at w + (g - g0) * group_stride): a batch's vectors, and what a
// prompt's blocks of 32 leave.
template <class A, class Tiles>
void bf16_tile_vectors(std::size_t rows, std::size_t chunks, std::size_t group_stride,
                       const uint16_t* w, std::size_t g0, std::size_t g1, std::size_t v0,
                       std::size_t n_vectors, const uint16_t* xb, std::size_t x_stride,
                       const float* bias, float* y, std::size_t y_stride) {
  const std::size_t x_bytes = x_stride * sizeof(uint16_t);
  alignas(64) float c[kBf16TileGroups][kBf16TileVectors * kBf16GroupRows];
  static constexpr Bf16TileConfigs kConfigs = bf16_tile_configs();
  for (; v0 < n_vectors; v0 += kBf16TileVectors) {
    const std::size_t m = std::min(kBf16TileVectors, n_vectors - v0);
    const uint16_t* x = xb + v0 * x_stride;
    Tiles::configure(kConfigs.of[m - 1]);
    for (std::size_t g = g0; g < g1; g += kBf16TileGroups) {
      const std::size_t pass = std::min<std::size_t>(kBf16TileGroups, g1 - g);
      const uint16_t* wg = w + (g - g0) * group_stride;
      if (pass == 3) {
        bf16_tile_pass<Tiles, 3>(wg, group_stride, chunks, x, x_bytes, &c[0][0]);
      } else if (pass == 2) {
        bf16_tile_pass<Tiles, 2>(wg, group_stride, chunks, x, x_bytes, &c[0][0]);
      } else {
        bf16_tile_pass<Tiles, 1>(wg, group_stride, chunks, x, x_bytes, &c[0][0]);
      }
      for (std::size_t p = 0; p < pass; ++p) {
        const std::size_t r0 = (g + p) * kBf16GroupRows;
        store_group_sums<A>(c[p], m, r0, std::min(kBf16GroupRows, rows - r0), bias,
                            y + v0 * y_stride, y_stride);
      }
    }
    Tiles::release();
  }
}

// The weights of a prompt on the tiles, a slab of groups at a time: packed bf16 ones as they are.
// A policy whose kStaged is true makes each slab's packed bf16 weights in the room the prompt
// gives it (q8_0_bf16_tiles.hpp). A template, as every type of the ISA files' headers.
template <class A>
struct Bf16Slabs {
  static constexpr bool kStaged = false;
  const uint16_t* w;

  // Group g0's weights, the next `groups` groups group_stride values apart.
  const uint16_t* slab(std::size_t g0, std::size_t /*groups*/, std::size_t group_stride,
                       uint16_t* /*room*/) const {
    return w + g0 * group_stride;
  }
};

// gemv_batch_bf16_bf16 of a prompt's rows, the weights' groups from `slabs`: per slab of rows,
// blocks of 32 vectors per 16 chunks by pairs of groups (bf16_tile_block), then the vectors left
// 16 at a time (bf16_tile_vectors).
template <class A, class Tiles, class Slabs>
void bf16_tile_prompt(std::size_t rows, std::size_t cols, const Slabs& slabs, std::size_t n_vectors,
                      const uint16_t* xb, std::size_t x_stride, const float* bias, float* y,
                      std::size_t y_stride) {
  const std::size_t packed_cols = bf16_packed_cols(cols);
  const std::size_t chunks = packed_cols / kBf16ChunkCols;
  const std::size_t groups = (rows + kBf16GroupRows - 1) / kBf16GroupRows;
  const std::size_t group_stride = kBf16GroupRows * packed_cols;
  constexpr std::size_t kTileFloats = kBf16TileVectors * kBf16GroupRows;
  constexpr std::size_t kBlockVectors = 2 * kBf16TileVectors;
  const std::size_t blocked = n_vectors - n_vectors % kBlockVectors;
  // Groups a slab, even (pairs of groups), and no more than the matrix has: the sums' scratch.
  const std::size_t slab = std::min(
      groups + groups % 2,
      std::max<std::size_t>(2, kBf16PromptSlabBytes / (group_stride * sizeof(uint16_t)) / 2 * 2));
  const std::size_t block_chunks = std::min(chunks, kBf16PromptChunks);
  const std::size_t a_values = kBlockVectors * block_chunks * kBf16ChunkCols;
  const std::size_t sum_floats = slab * kBf16GroupRows * kBlockVectors;
  const std::size_t room_values = Slabs::kStaged ? slab * group_stride : 0;
  auto* a = static_cast<uint16_t*>(
      thread_scratch((a_values + room_values) * sizeof(uint16_t) + sum_floats * sizeof(float)));
  float* sums = reinterpret_cast<float*>(a + a_values);
  uint16_t* room = reinterpret_cast<uint16_t*>(sums + sum_floats);
  static constexpr TileConfig kBlockConfig = bf16_block_tile_config();
  for (std::size_t s0 = 0; s0 < groups; s0 += slab) {
    const std::size_t s1 = std::min(groups, s0 + slab);
    const uint16_t* ws = slabs.slab(s0, s1 - s0, group_stride, room);
    if (blocked > 0) Tiles::configure(kBlockConfig);
    for (std::size_t v0 = 0; v0 < blocked; v0 += kBlockVectors) {
      const uint16_t* x = xb + v0 * x_stride;
      for (std::size_t k0 = 0; k0 < chunks; k0 += block_chunks) {
        const std::size_t kc = std::min(block_chunks, chunks - k0);
        pack_prompt_block<A>(x, x_stride, k0, kc, a);
        for (std::size_t g0 = s0; g0 < s1; g0 += 2) {
          const uint16_t* wg = ws + (g0 - s0) * group_stride + k0 * kBf16GroupRows * kBf16ChunkCols;
          float* c = sums + (g0 - s0) * kBlockVectors * kBf16GroupRows;
          const std::size_t pass = std::min<std::size_t>(2, s1 - g0);
          if (pass == 2) {
            bf16_tile_block<Tiles, 2>(wg, group_stride, kc, a, k0 == 0, c);
          } else {
            bf16_tile_block<Tiles, 1>(wg, group_stride, kc, a, k0 == 0, c);
          }
          if (k0 + kc < chunks) continue;
          // The pair's last chunks: its sums leave now, while the next pair's products run.
          for (std::size_t h = 0; h < 2; ++h) {
            for (std::size_t g = 0; g < pass; ++g) {
              const std::size_t r0 = (g0 + g) * kBf16GroupRows;
              store_group_sums<A>(c + (h * pass + g) * kTileFloats, kBf16TileVectors, r0,
                                  std::min(kBf16GroupRows, rows - r0), bias,
                                  y + (v0 + h * kBf16TileVectors) * y_stride, y_stride);
            }
          }
        }
      }
    }
    if (blocked > 0) Tiles::release();
    bf16_tile_vectors<A, Tiles>(rows, chunks, group_stride, ws, s0, s1, blocked, n_vectors, xb,
                                x_stride, bias, y, y_stride);
  }
}

// gemv_batch_bf16_bf16 (kernels.h): from 32 vectors on (a prompt's rows) bf16_tile_prompt, fewer
// (a batch) 16 at a time by three groups over all groups. Every sum is the same chain of tile
// products, so the bits do not depend on which way a vector went.
template <class A, class Tiles>
void gemv_batch_bf16_tiles(std::size_t rows, std::size_t cols, const uint16_t* w,
                           std::size_t n_vectors, const uint16_t* xb, std::size_t x_stride,
                           const float* bias, float* y, std::size_t y_stride) {
  if (n_vectors >= 2 * kBf16TileVectors) {
    bf16_tile_prompt<A, Tiles>(rows, cols, Bf16Slabs<A>{w}, n_vectors, xb, x_stride, bias, y,
                               y_stride);
    return;
  }
  const std::size_t packed_cols = bf16_packed_cols(cols);
  bf16_tile_vectors<A, Tiles>(rows, packed_cols / kBf16ChunkCols, kBf16GroupRows * packed_cols, w,
                              0, (rows + kBf16GroupRows - 1) / kBf16GroupRows, 0, n_vectors, xb,
                              x_stride, bias, y, y_stride);
}

template <class A, class Tiles>
void gemv_bf16_tiles(std::size_t rows, std::size_t cols, const uint16_t* w, const uint16_t* xb,
                     const float* bias, float* y) {
  gemv_batch_bf16_tiles<A, Tiles>(rows, cols, w, 1, xb, 0, bias, y, 0);
}

}  // namespace aft::kernels::simd
