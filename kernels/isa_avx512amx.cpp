// The avx512amx kernel table: the avx512bf16 table with batches of q8_0 vectors on AMX's int8
// tiles (q8_0_tiles.hpp), 16 vectors per tile product and the rest on the VNNI GEMV; every vector
// gets the bits of the VNNI table's gemv_q8_0. Opt-in (AFT_ISA=avx512amx, dispatch.cpp) until it
// has been measured against the VNNI kernels on an AMX machine. The tile kernel's float work is
// instantiated for xsimd::avx512cd, an architecture no other table uses (see README.md).
// Compiled with -mavx512f -mavx512cd -mavx512dq -mavx512bw -mavx512vnni -mavx512bf16 -mamx-tile
// -mamx-int8 -mfma (see CMakeLists.txt).
#include <immintrin.h>

#include "kernels/emulated_tiles.h"
#include "kernels/isa_tables.h"
#include "kernels/q8_0_tiles.hpp"

// GCC spells the macros __AMX_TILE__ and __AMX_INT8__, Clang __AMXTILE__ and __AMXINT8__.
#if !XSIMD_WITH_AVX512CD || !(defined(__AMX_TILE__) || defined(__AMXTILE__)) || \
    !(defined(__AMX_INT8__) || defined(__AMXINT8__))
#error "isa_avx512amx.cpp must be compiled with -mavx512cd -mamx-tile -mamx-int8"
#endif

namespace aft::kernels {
namespace {

using Arch = xsimd::avx512cd;

// The tile instructions (GCC's intrinsics take the tile numbers as literals).
struct AmxTiles {
  static void configure(const simd::TileConfig& config) {
    // ldtilecfg's asm names 8 bytes of its operand: the whole configuration must be in memory.
    asm volatile("" ::: "memory");
    _tile_loadconfig(&config);
  }
  static void release() { _tile_release(); }
  template <int kSet>
  static void product(const int8_t* x, std::size_t x_stride, const int8_t* w, int32_t* c) {
    constexpr std::size_t kB = kQ8GroupRows * 4;  // B's row: the 16 rows' 4 quants
    if constexpr (kSet == 0) {
      _tile_zero(0);
      _tile_loadd(1, x, x_stride);
      _tile_loadd(2, w, kB);
      _tile_dpbssd(0, 1, 2);
      _tile_stored(0, c, kQ8GroupRows * sizeof(int32_t));
    } else {
      static_assert(kSet == 1, "two sets of tiles");
      _tile_zero(3);
      _tile_loadd(4, x, x_stride);
      _tile_loadd(5, w, kB);
      _tile_dpbssd(3, 4, 5);
      _tile_stored(3, c, kQ8GroupRows * sizeof(int32_t));
    }
  }
};

// Whole tiles of vectors on the tiles, the rest on the VNNI table's batch GEMV.
template <class Tiles>
void gemv_batch_q8_0_on_tiles(std::size_t rows, std::size_t cols, const int8_t* wq, const float* wd,
                              std::size_t n_vectors, const int8_t* xq, const float* xd,
                              const float* bias, float* y, std::size_t y_stride) {
  const std::size_t tiled = n_vectors - n_vectors % simd::kQ8TileVectors;
  if (tiled > 0) {
    simd::gemv_batch_q8_0_tiles<Arch, Tiles>(rows, cols, wq, wd, tiled, xq, xd, bias, y, y_stride);
  }
  if (tiled < n_vectors) {
    avx512vnni_kernels().gemv_batch_q8_0(rows, cols, wq, wd, n_vectors - tiled, xq + tiled * cols,
                                         xd + tiled * (cols / kQ8BlockSize), bias,
                                         y + tiled * y_stride, y_stride);
  }
}

}  // namespace

const KernelTable& avx512amx_kernels() {
  static const KernelTable kTable = [] {
    KernelTable table = avx512bf16_kernels();
    table.isa = "avx512amx";
    table.gemv_batch_q8_0 = &gemv_batch_q8_0_on_tiles<AmxTiles>;
    return table;
  }();
  return kTable;
}

void gemv_batch_q8_0_emulated_tiles(std::size_t rows, std::size_t cols, const int8_t* wq,
                                    const float* wd, std::size_t n_vectors, const int8_t* xq,
                                    const float* xd, const float* bias, float* y,
                                    std::size_t y_stride) {
  gemv_batch_q8_0_on_tiles<simd::EmulatedTiles>(rows, cols, wq, wd, n_vectors, xq, xd, bias, y,
                                                y_stride);
}

}  // namespace aft::kernels
