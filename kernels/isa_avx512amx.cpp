// The avx512amx kernel table: the avx512bf16 table with batches of q8_0 vectors on AMX's int8
// tiles (q8_0_tiles.hpp: 16 vectors per tile product, the rest on the VNNI GEMV; every vector
// gets the bits of the VNNI table's gemv_q8_0) and the bf16 x bf16 GEMVs, one vector and
// batches, on its bf16 tiles (bf16_tiles.hpp), and a q8_0 model's prompts on the bf16 tiles too,
// its weights dequantized a slab at a time (q8_0_bf16_tiles.hpp). The default where the OS grants
// the tiles (dispatch.cpp): on a Sapphire Rapids, with their prefetch, its q8_0 tiles decode
// batches of 16 level with the VNNI kernel or faster, and its bf16 tiles twice as fast as
// vdpbf16ps, one sequence level (docs/benchmarks.md, "AMX's tiles as the default"). The q8_0 tile
// kernel's float work is instantiated for xsimd::avx512cd, an architecture no other table uses (see
// README.md).
// Compiled with -mavx512f -mavx512cd -mavx512dq -mavx512bw -mavx512vnni -mavx512bf16 -mamx-tile
// -mamx-int8 -mamx-bf16 -mfma (see CMakeLists.txt).
#include "kernels/bf16_tiles.hpp"
#include "kernels/emulated_tiles.h"
#include "kernels/isa_tables.h"
#include "kernels/q8_0_bf16_tiles.hpp"
#include "kernels/q8_0_tiles.hpp"

// GCC spells the macros __AMX_TILE__, __AMX_INT8__ and __AMX_BF16__, Clang __AMXTILE__,
// __AMXINT8__ and __AMXBF16__.
#if !XSIMD_WITH_AVX512CD || !(defined(__AMX_TILE__) || defined(__AMXTILE__)) || \
    !(defined(__AMX_INT8__) || defined(__AMXINT8__)) ||                         \
    !(defined(__AMX_BF16__) || defined(__AMXBF16__))
#error "isa_avx512amx.cpp must be compiled with -mavx512cd -mamx-tile -mamx-int8 -mamx-bf16"
#endif

namespace aft::kernels {
namespace {

using Arch = xsimd::avx512cd;

// The tile instructions (tile_config.h's Tiles policy). The tile numbers are immediates of the
// encoding, printed by %c; the loads and stores name memory the compiler cannot see, hence the
// clobbers (AT&T operand order: sources first).
struct AmxTiles {
  static void configure(const simd::TileConfig& config) {
    asm volatile("ldtilecfg %0" ::"m"(config) : "memory");
  }
  static void release() { asm volatile("tilerelease" ::: "memory"); }
  template <int t>
  static void zero() {
    asm volatile("tilezero %%tmm%c0" ::"i"(t));
  }
  template <int t>
  static void load(const void* base, std::size_t stride) {
    asm volatile("tileloadd (%0,%1,1), %%tmm%c2" ::"r"(base), "r"(stride), "i"(t) : "memory");
  }
  template <int t>
  static void store(void* base, std::size_t stride) {
    asm volatile("tilestored %%tmm%c0, (%1,%2,1)" ::"i"(t), "r"(base), "r"(stride) : "memory");
  }
  template <int c, int a, int b>
  static void dpbssd() {
    asm volatile("tdpbssd %%tmm%c2, %%tmm%c1, %%tmm%c0" ::"i"(c), "i"(a), "i"(b));
  }
  template <int c, int a, int b>
  static void dpbf16ps() {
    asm volatile("tdpbf16ps %%tmm%c2, %%tmm%c1, %%tmm%c0" ::"i"(c), "i"(a), "i"(b));
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
    table.gemv_bf16_bf16 = &simd::gemv_bf16_tiles<Arch, AmxTiles>;
    table.gemv_batch_bf16_bf16 = &simd::gemv_batch_bf16_tiles<Arch, AmxTiles>;
    table.bf16_batch_on_tiles = true;
    table.gemv_prompt_q8_0_bf16 = &simd::gemv_prompt_q8_0_bf16_tiles<Arch, AmxTiles>;
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

void gemv_batch_bf16_bf16_emulated_tiles(std::size_t rows, std::size_t cols, const uint16_t* w,
                                         std::size_t n_vectors, const uint16_t* xb,
                                         std::size_t x_stride, const float* bias, float* y,
                                         std::size_t y_stride) {
  simd::gemv_batch_bf16_tiles<Arch, simd::EmulatedTiles>(rows, cols, w, n_vectors, xb, x_stride,
                                                         bias, y, y_stride);
}

void gemv_prompt_q8_0_bf16_emulated_tiles(std::size_t rows, std::size_t cols, const int8_t* wq,
                                          const float* wd, std::size_t n_vectors,
                                          const uint16_t* xb, std::size_t x_stride,
                                          const float* bias, float* y, std::size_t y_stride) {
  simd::gemv_prompt_q8_0_bf16_tiles<Arch, simd::EmulatedTiles>(rows, cols, wq, wd, n_vectors, xb,
                                                               x_stride, bias, y, y_stride);
}

}  // namespace aft::kernels
