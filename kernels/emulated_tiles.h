// AMX's tile registers and the instructions the q8_0 tile GEMV uses (q8_0_tiles.hpp), in plain
// C++ after the Intel SDM's pseudocode for ldtilecfg, tilezero, tileloadd, tdpbssd and
// tilestored: the reference the tile kernel is tested against where the CPU has no AMX. What the
// hardware would fault on (an invalid configuration, an unconfigured tile, operand shapes that do
// not fit) aborts with a message naming it, so a test cannot pass on a use the hardware refuses.
// Each thread has its own tiles, as each hardware thread does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/q8_0_tiles.hpp"

namespace aft::kernels::simd {

struct EmulatedTiles {
  static constexpr int kTiles = 8;      // palette 1
  static constexpr int kMaxRows = 16;   // palette 1
  static constexpr int kMaxBytes = 64;  // palette 1, per row

  static void configure(const TileConfig& config) {
    if (config.palette != 1)
      fail("ldtilecfg: palette %d (only palette 1 is emulated)", config.palette);
    if (config.start_row != 0) fail("ldtilecfg: start_row %d is not 0", config.start_row);
    for (uint8_t reserved : config.reserved) {
      if (reserved != 0) fail("ldtilecfg: a reserved byte is %d, not 0", reserved);
    }
    for (int t = 0; t < 16; ++t) {
      const bool used = config.rows[t] != 0 || config.colsb[t] != 0;
      if (!used) continue;
      if (t >= kTiles) fail("ldtilecfg: tile %d does not exist in palette 1", t);
      if (config.rows[t] == 0 || config.colsb[t] == 0) fail("ldtilecfg: tile %d is 0-sized", t);
      if (config.rows[t] > kMaxRows) fail("ldtilecfg: tile %d has more than 16 rows", t);
      if (config.colsb[t] > kMaxBytes || config.colsb[t] % 4 != 0) {
        fail("ldtilecfg: tile %d's rows are not 4 to 64 bytes in steps of 4", t);
      }
    }
    State& s = state();
    s.config = config;
    s.configured = true;
    std::memset(s.tiles, 0, sizeof s.tiles);
  }
  static void release() { state().configured = false; }

  template <int kSet>
  static void product(const int8_t* x, std::size_t x_stride, const int8_t* w, int32_t* c) {
    constexpr int kC = 3 * kSet, kA = kC + 1, kB = kC + 2;
    zero(kC);
    load(kA, x, x_stride);
    load(kB, w, kMaxBytes);
    dpbssd(kC, kA, kB);
    store(kC, c, kMaxBytes);
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

  [[noreturn]] static void fail(const char* format, int value) {
    std::fprintf(stderr, "emulated AMX: ");
    std::fprintf(stderr, format, value);
    std::fprintf(stderr, "\n");
    std::abort();
  }
  static const TileConfig& configured(int t) {
    const State& s = state();
    if (!s.configured) fail("tile %d used without ldtilecfg", t);
    if (s.config.rows[t] == 0) fail("tile %d used but not configured", t);
    return s.config;
  }

  static void zero(int t) {
    configured(t);
    std::memset(state().tiles[t], 0, sizeof state().tiles[t]);
  }
  // Bytes past a row's colsb and rows past the tile's rows read as 0.
  static void load(int t, const void* base, std::size_t stride) {
    const TileConfig& config = configured(t);
    State& s = state();
    std::memset(s.tiles[t], 0, sizeof s.tiles[t]);
    for (int r = 0; r < config.rows[t]; ++r) {
      std::memcpy(s.tiles[t][r], static_cast<const uint8_t*>(base) + r * stride, config.colsb[t]);
    }
  }
  static void store(int t, void* base, std::size_t stride) {
    const TileConfig& config = configured(t);
    for (int r = 0; r < config.rows[t]; ++r) {
      std::memcpy(static_cast<uint8_t*>(base) + r * stride, state().tiles[t][r], config.colsb[t]);
    }
  }
  // c[m][n] += sum over k < a.colsb / 4, i < 4 of a[m][4 k + i] * b[k][4 n + i], signed bytes,
  // int32 sums that wrap.
  static void dpbssd(int c, int a, int b) {
    const TileConfig& config = configured(c);
    configured(a);
    configured(b);
    if (c == a || c == b || a == b) fail("tdpbssd: tile %d is used twice", c);
    if (config.colsb[c] != config.colsb[b]) fail("tdpbssd: C and B differ in width (C %d)", c);
    if (config.rows[c] != config.rows[a]) fail("tdpbssd: C and A differ in rows (C %d)", c);
    if (config.colsb[a] != 4 * config.rows[b]) fail("tdpbssd: A's K is not B's (A %d)", a);
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
};

}  // namespace aft::kernels::simd
