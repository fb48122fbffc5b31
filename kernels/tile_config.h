// AMX's tile configuration, and the policy through which the tile kernels (q8_0_tiles.hpp,
// bf16_tiles.hpp) run the tile instructions: AmxTiles on the hardware (isa_avx512amx.cpp), or
// EmulatedTiles (emulated_tiles.h) to test the kernels where the CPU has none.
//
// A Tiles policy, tile numbers as template arguments (the instructions encode them):
//   configure(const TileConfig&)   ldtilecfg (zeroes every tile)
//   release()                      tilerelease
//   zero<t>()                      tilezero
//   load<t>(base, stride)          tileloadd: the tile's rows from base, stride bytes apart
//   store<t>(base, stride)         tilestored
//   dpbssd<c, a, b>()              c += a b, signed bytes, int32 sums
//   dpbf16ps<c, a, b>()            c += a b, pairs of bf16, f32 sums
#pragma once

#include <cstddef>
#include <cstdint>

namespace aft::kernels::simd {

// The 64-byte operand of ldtilecfg, palette 1 (Intel SDM, "Intel AMX"): per tile its rows and
// bytes per row; unused tiles 0 x 0; reserved bytes 0.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};

  constexpr void set(std::size_t tile, std::size_t tile_rows, std::size_t bytes_per_row) {
    rows[tile] = static_cast<uint8_t>(tile_rows);
    colsb[tile] = static_cast<uint16_t>(bytes_per_row);
  }
};
static_assert(sizeof(TileConfig) == 64, "ldtilecfg reads 64 bytes");

// Palette 1's tiles: 8, of at most 16 rows of 64 bytes.
constexpr int kTiles = 8;
constexpr std::size_t kTileRows = 16;
constexpr std::size_t kTileRowBytes = 64;

// How far ahead of the tile loads the kernels prefetch their weights to L1: the tile loads
// otherwise waited on L3 or memory. Measured on a Sapphire Rapids (2 vCPUs, enwik8-local decode,
// medians of 6 alternated rounds against none): bf16 one sequence 1.2x (2 threads) to 1.7x
// (1 thread), 16 sequences 1.1-1.4x; q8_0 16 sequences 1.1-1.2x. 2 KB ahead gained less in bf16
// batches, 8 KB to L2 less everywhere.
constexpr std::size_t kTilePrefetchBytes = 4096;

// Prefetches the kBytes of weights kTilePrefetchBytes past `at` (a template, as every function
// of the ISA files' headers). An address, not a pointer: near the end it passes the weights,
// which a prefetch may (it does not fault).
template <std::size_t kBytes>
[[gnu::always_inline]] inline void prefetch_weights_ahead(const void* at) {
  const std::uintptr_t ahead = reinterpret_cast<std::uintptr_t>(at) + kTilePrefetchBytes;
  for (std::size_t line = 0; line < kBytes; line += kTileRowBytes) {
    __builtin_prefetch(reinterpret_cast<const void*>(ahead + line), 0, 3);
  }
}

}  // namespace aft::kernels::simd
