// AMX's tile registers and the instructions the tile kernels use (q8_0_tiles.hpp,
// bf16_tiles.hpp), in plain C++ after the Intel SDM's pseudocode for ldtilecfg, tilezero,
// tileloadd, tilestored, tdpbssd and tdpbf16ps: the Tiles policy (tile_config.h) the kernels are
// tested with where the CPU has no AMX. What the hardware would fault on (an invalid
// configuration, an unconfigured tile, operand shapes that do not fit) aborts with a message
// naming it, so a test cannot pass on a use the hardware refuses. Each thread has its own tiles,
// as each hardware thread does.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/tile_config.h"

namespace aft::kernels::simd {

struct EmulatedTiles {
  static constexpr int kMaxRows = static_cast<int>(kTileRows);
  static constexpr int kMaxBytes = static_cast<int>(kTileRowBytes);

  static void configure(const TileConfig& config) {
    if (config.palette != 1)
      fail("ldtilecfg", "palette %d (only palette 1 is emulated)", config.palette);
    if (config.start_row != 0) fail("ldtilecfg", "start_row %d is not 0", config.start_row);
    for (uint8_t reserved : config.reserved) {
      if (reserved != 0) fail("ldtilecfg", "a reserved byte is %d, not 0", reserved);
    }
    for (int t = 0; t < 16; ++t) {
      const bool used = config.rows[t] != 0 || config.colsb[t] != 0;
      if (!used) continue;
      if (t >= kTiles) fail("ldtilecfg", "tile %d does not exist in palette 1", t);
      if (config.rows[t] == 0 || config.colsb[t] == 0) fail("ldtilecfg", "tile %d is 0-sized", t);
      if (config.rows[t] > kMaxRows) fail("ldtilecfg", "tile %d has more than 16 rows", t);
      if (config.colsb[t] > kMaxBytes || config.colsb[t] % 4 != 0) {
        fail("ldtilecfg", "tile %d's rows are not 4 to 64 bytes in steps of 4", t);
      }
    }
    State& s = state();
    s.config = config;
    s.configured = true;
    std::memset(s.tiles, 0, sizeof s.tiles);
  }
  static void release() { state().configured = false; }

  template <int t>
  static void zero() {
    configured(t);
    std::memset(state().tiles[t], 0, sizeof state().tiles[t]);
  }
  // Bytes past a row's colsb and rows past the tile's rows read as 0.
  template <int t>
  static void load(const void* base, std::size_t stride) {
    const TileConfig& config = configured(t);
    State& s = state();
    std::memset(s.tiles[t], 0, sizeof s.tiles[t]);
    for (int r = 0; r < config.rows[t]; ++r) {
      std::memcpy(s.tiles[t][r], static_cast<const uint8_t*>(base) + r * stride, config.colsb[t]);
    }
  }
  template <int t>
  static void store(void* base, std::size_t stride) {
    const TileConfig& config = configured(t);
    for (int r = 0; r < config.rows[t]; ++r) {
      std::memcpy(static_cast<uint8_t*>(base) + r * stride, state().tiles[t][r], config.colsb[t]);
    }
  }
  // c[m][n] += sum over k < a.colsb / 4, i < 4 of a[m][4 k + i] * b[k][4 n + i], signed bytes,
  // int32 sums that wrap.
  template <int c, int a, int b>
  static void dpbssd() {
    const TileConfig& config = check_product("tdpbssd", c, a, b);
    State& s = state();
    for (int m = 0; m < config.rows[c]; ++m) {
      for (int n = 0; n < config.colsb[c] / 4; ++n) {
        uint32_t sum;
        std::memcpy(&sum, &s.tiles[c][m][4 * n], sizeof sum);
        for (int k = 0; k < config.colsb[a] / 4; ++k) {
          for (int i = 0; i < 4; ++i) {
            const int product = static_cast<int8_t>(s.tiles[a][m][4 * k + i]) *
                                static_cast<int8_t>(s.tiles[b][k][4 * n + i]);
            sum += static_cast<uint32_t>(product);
          }
        }
        std::memcpy(&s.tiles[c][m][4 * n], &sum, sizeof sum);
      }
    }
  }
  // c[m][n] = fma(a[m][2 k + 1], b[k][2 n + 1], fma(a[m][2 k], b[k][2 n], c[m][n])) for k = 0, 1,
  // ... < a.colsb / 4, bf16 pairs made floats: each step an f32 FMA rounded to nearest even,
  // subnormal inputs and results flushed to zero.
  template <int c, int a, int b>
  static void dpbf16ps() {
    const TileConfig& config = check_product("tdpbf16ps", c, a, b);
    State& s = state();
    for (int m = 0; m < config.rows[c]; ++m) {
      for (int n = 0; n < config.colsb[c] / 4; ++n) {
        float sum;
        std::memcpy(&sum, &s.tiles[c][m][4 * n], sizeof sum);
        for (int k = 0; k < config.colsb[a] / 4; ++k) {
          for (int i = 0; i < 2; ++i) {
            sum = flush(std::fma(bf16_at(s.tiles[a][m], 2 * k + i),
                                 bf16_at(s.tiles[b][k], 2 * n + i), sum));
          }
        }
        std::memcpy(&s.tiles[c][m][4 * n], &sum, sizeof sum);
      }
    }
  }

 private:
  struct State {
    TileConfig config;
    bool configured = false;
    alignas(64) uint8_t tiles[kTiles][kMaxRows][kMaxBytes];
  };
  static State& state() {
    static thread_local State s;
    return s;
  }

  [[noreturn]] static void fail(const char* instruction, const char* format, int value) {
    std::fprintf(stderr, "emulated AMX: %s: ", instruction);
    std::fprintf(stderr, format, value);
    std::fprintf(stderr, "\n");
    std::abort();
  }
  static const TileConfig& configured(int t) {
    const State& s = state();
    if (!s.configured) fail("a tile instruction", "tile %d used without ldtilecfg", t);
    if (s.config.rows[t] == 0) fail("a tile instruction", "tile %d used but not configured", t);
    return s.config;
  }

  // C, A and B of a product: configured, distinct, and of shapes that fit (C: M x N, A: M x K,
  // B: K / 4 x N, in 4-byte elements).
  static const TileConfig& check_product(const char* name, int c, int a, int b) {
    const TileConfig& config = configured(c);
    configured(a);
    configured(b);
    if (c == a || c == b || a == b) fail(name, "tile %d is used twice", c);
    if (config.colsb[c] != config.colsb[b]) fail(name, "C and B differ in width (C %d)", c);
    if (config.rows[c] != config.rows[a]) fail(name, "C and A differ in rows (C %d)", c);
    if (config.colsb[a] != 4 * config.rows[b]) fail(name, "A's K is not B's (A %d)", a);
    return config;
  }
  // A bf16 element of a tile row as a float; a subnormal reads as zero of its sign.
  static float bf16_at(const uint8_t* row, int i) {
    uint16_t half;
    std::memcpy(&half, row + 2 * i, sizeof half);
    uint32_t bits = uint32_t{half} << 16;
    if ((bits & 0x7f800000u) == 0) bits &= 0x80000000u;
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }
  static float flush(float v) {
    return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v;
  }
};

}  // namespace aft::kernels::simd
