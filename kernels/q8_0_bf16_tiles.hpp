// A prompt's rows by q8_0 weights on the bf16 tiles (KernelTable::gemv_prompt_q8_0_bf16, the
// avx512amx table): each slab of the prompt's weights (bf16_tile_prompt) is dequantized into the
// thread's scratch as packed bf16, then multiplied as a bf16 model's are. The q8_0 tile kernel
// (q8_0_tiles.hpp) scales every block of 32 columns of every tile of sums in AVX-512 floats, which
// a Sapphire Rapids cannot overlap with the tile products; here the scales are applied once per
// weight and slab, and a slab serves all of a prompt's vectors (docs/benchmarks.md).
//
// A weight becomes bf16(wd * q): the product in f32, rounded to nearest, ties to even, with zero
// and subnormal products a zero of their sign (vcvtne2ps2bf16). The activations are round_bf16's.
// So a prompt row's results are those of the bf16 tile kernel on the dequantized weights, not the
// integer products of the same row decoded alone.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/bf16_tiles.hpp"
#include "kernels/kernels.h"

#if defined(__AVX512BF16__)
#include <immintrin.h>

namespace aft::kernels::simd {

// Groups [0, groups) of packed q8_0 weights (quants wq, scales wd, cols % 32 == 0), dequantized to
// packed bf16 at w (packed_weights.h: a q8_0 block is a bf16 chunk). A block's step s (the 16
// rows' columns 4 s to 4 s + 3) becomes the chunk's lines 2 s and 2 s + 1 (columns 4 s, 4 s + 1
// and 4 s + 2, 4 s + 3 of the 16 rows).
template <class A>
void dequantize_q8_0_groups(std::size_t groups, std::size_t cols, const int8_t* wq, const float* wd,
                            uint16_t* w) {
  constexpr std::size_t kSteps = kQ8BlockSize / 4;
  constexpr std::size_t kBlockValues = kQ8GroupRows * kQ8BlockSize;
  constexpr std::size_t kLineValues = 2 * kQ8GroupRows;
  // A quarter of a step (16 quants: rows 4 t to 4 t + 3) takes row 4 t + l / 4's scale in lane l.
  const __m512i quarter_rows[4] = {
      _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
      _mm512_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7),
      _mm512_setr_epi32(8, 8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 10, 11, 11, 11, 11),
      _mm512_setr_epi32(12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15)};
  // Rows 0-7 then 8-15 of a step in bf16, each row's 4 columns 2 pairs (32-bit lanes): the first
  // pairs of all 16 rows, then the second.
  const __m512i first_pairs =
      _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i second_pairs = _mm512_add_epi32(first_pairs, _mm512_set1_epi32(1));
  const std::size_t blocks = groups * (cols / kQ8BlockSize);
  for (std::size_t b = 0; b < blocks; ++b) {
    const __m512 scales = _mm512_loadu_ps(wd + b * kQ8GroupRows);
    __m512 quarter_scales[4];
    for (int t = 0; t < 4; ++t) {
      quarter_scales[t] = _mm512_permutexvar_ps(quarter_rows[t], scales);
    }
    const int8_t* q = wq + b * kBlockValues;
    uint16_t* to = w + b * kBlockValues;
    prefetch_weights_ahead<kBlockValues>(q);
#pragma GCC unroll 8
    for (std::size_t s = 0; s < kSteps; ++s) {
      __m512 values[4];
      for (int t = 0; t < 4; ++t) {
        const __m128i quants =
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + s * 64 + t * 16));
        values[t] =
            _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(quants)), quarter_scales[t]);
      }
      const auto low = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(values[1], values[0]));
      const auto high = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(values[3], values[2]));
      _mm512_store_si512(to + 2 * s * kLineValues,
                         _mm512_permutex2var_epi32(low, first_pairs, high));
      _mm512_store_si512(to + (2 * s + 1) * kLineValues,
                         _mm512_permutex2var_epi32(low, second_pairs, high));
    }
  }
}

// A prompt's weights from q8_0 ones (bf16_tile_prompt's Slabs): each slab dequantized into the
// room the prompt gives it.
template <class A>
struct Q8_0Slabs {
  static constexpr bool kStaged = true;
  const int8_t* wq;
  const float* wd;
  std::size_t cols;

  const uint16_t* slab(std::size_t g0, std::size_t groups, std::size_t /*group_stride*/,
                       uint16_t* room) const {
    dequantize_q8_0_groups<A>(groups, cols, wq + g0 * kQ8GroupRows * cols,
                              wd + g0 * kQ8GroupRows * (cols / kQ8BlockSize), room);
    return room;
  }
};

// KernelTable::gemv_prompt_q8_0_bf16.
template <class A, class Tiles>
void gemv_prompt_q8_0_bf16_tiles(std::size_t rows, std::size_t cols, const int8_t* wq,
                                 const float* wd, std::size_t n_vectors, const uint16_t* xb,
                                 std::size_t x_stride, const float* bias, float* y,
                                 std::size_t y_stride) {
  bf16_tile_prompt<A, Tiles>(rows, cols, Q8_0Slabs<A>{wq, wd, cols}, n_vectors, xb, x_stride, bias,
                             y, y_stride);
}

}  // namespace aft::kernels::simd
#endif
