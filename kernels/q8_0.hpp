// q8_0 weights and activations (docs/format.md): quantization, dequantization, and the GEMV of
// q8_0 weights by q8_0 activations, for one vector (gemv_q8_0) or several (gemv_batch_q8_0).
//
// The GEMV takes R rows per pass, so that each step's activation quants are loaded and prepared
// once for all of them (Q8BlockDot). Per row, a float vector accumulator takes, step after step,
// fma(float(partial integer sums of the step's blocks), wd * xd of their blocks); its lanes are
// added (xsimd::hadd) once at the end, then the bias. The batch version runs the same per-row
// code on panels of rows that stay in L1 while every vector passes: each vector gets the bits of
// gemv_q8_0. Single-threaded.
#pragma once

#include <cstddef>
#include <cstdint>

#include <xsimd/xsimd.hpp>

#include "kernels/kernels.h"
#include "kernels/q8_block_dot.hpp"

namespace aft::kernels::simd {

// Per block: the largest magnitude (an exact max, in any order), one IEEE division for the scale
// and one per value; rounding to nearest even (cvtps2dq / fcvtns) after clamping, which commutes
// with it for integer bounds. Bit-identical to the scalar reference.
template <class A>
void quantize_q8_0(std::size_t n, const float* x, int8_t* q, float* d) {
  using B = xsimd::batch<float, A>;
  using I = xsimd::batch<int32_t, A>;
  constexpr std::size_t L = B::size;
  static_assert(kQ8BlockSize % L == 0, "a block is whole batches");
  for (std::size_t b = 0; b < n / kQ8BlockSize; ++b) {
    const float* xb = x + b * kQ8BlockSize;
    int8_t* qb = q + b * kQ8BlockSize;
    B top = xsimd::abs(B::load_unaligned(xb));
    for (std::size_t i = L; i < kQ8BlockSize; i += L) {
      top = xsimd::max(top, xsimd::abs(B::load_unaligned(xb + i)));
    }
    alignas(A::alignment()) float lanes[L];
    top.store_aligned(lanes);
    float amax = 0.0f;
    for (float v : lanes) amax = amax < v ? v : amax;
    const float scale = amax / 127.0f;
    d[b] = scale;
    if (scale == 0.0f) {
      for (std::size_t i = 0; i < kQ8BlockSize; ++i) qb[i] = 0;
      continue;
    }
    alignas(A::alignment()) int32_t quants[kQ8BlockSize];
    for (std::size_t i = 0; i < kQ8BlockSize; i += L) {
      const B v = B::load_unaligned(xb + i) / B(scale);
      const I rounded = xsimd::nearbyint_as_int(xsimd::min(xsimd::max(v, B(-127.0f)), B(127.0f)));
      rounded.store_aligned(quants + i);
    }
    for (std::size_t i = 0; i < kQ8BlockSize; ++i) qb[i] = static_cast<int8_t>(quants[i]);
  }
}

// One multiply per value; the plain loop vectorizes with this file's flags.
template <class A>
void dequantize_q8_0(std::size_t n, const int8_t* q, const float* d, float* x) {
  for (std::size_t b = 0; b < n / kQ8BlockSize; ++b) {
    const float scale = d[b];
    for (std::size_t i = b * kQ8BlockSize; i < (b + 1) * kQ8BlockSize; ++i) {
      x[i] = scale * static_cast<float>(q[i]);
    }
  }
}

// Rows [0, R) of wq / wd (row strides cols and cols / 32) for one activation vector.
template <class A, std::size_t R>
[[gnu::always_inline]] inline void gemv_block_q8_0(std::size_t cols, const int8_t* wq,
                                                   const float* wd, const int8_t* xq,
                                                   const float* xd, const float* bias, float* y) {
  using B = xsimd::batch<float, A>;
  using D = Q8BlockDot<A>;
  const std::size_t blocks = cols / kQ8BlockSize;
  const std::size_t whole = blocks - blocks % D::kBlocks;
  B acc[R];
  for (std::size_t i = 0; i < R; ++i) acc[i] = B(0.0f);
  std::size_t b = 0;
  for (; b < whole; b += D::kBlocks) {
    const typename D::X x = D::load_x(xq + b * kQ8BlockSize);
    const B x_scales = D::scales(xd + b);
    for (std::size_t i = 0; i < R; ++i) {
      const B sums = xsimd::batch_cast<float>(D::dot(wq + i * cols + b * kQ8BlockSize, x));
      acc[i] = xsimd::fma(sums, D::scales(wd + i * blocks + b) * x_scales, acc[i]);
    }
  }
  if constexpr (D::kBlocks > 1) {
    if (b < blocks) {  // one block left
      const typename D::X x = D::load_x_one(xq + b * kQ8BlockSize);
      for (std::size_t i = 0; i < R; ++i) {
        const B sums = xsimd::batch_cast<float>(D::dot_one(wq + i * cols + b * kQ8BlockSize, x));
        acc[i] = xsimd::fma(sums, B(wd[i * blocks + b]) * B(xd[b]), acc[i]);
      }
    }
  }
  for (std::size_t i = 0; i < R; ++i) {
    const float sum = xsimd::hadd(acc[i]);
    y[i] = bias ? sum + bias[i] : sum;
  }
}

// Groups of kRows rows, then one by one.
template <class A>
void gemv_q8_0(std::size_t rows, std::size_t cols, const int8_t* wq, const float* wd,
               const int8_t* xq, const float* xd, const float* bias, float* y) {
  constexpr std::size_t kRows = 4;
  const std::size_t blocks = cols / kQ8BlockSize;
  std::size_t r = 0;
  for (; r + kRows <= rows; r += kRows) {
    gemv_block_q8_0<A, kRows>(cols, wq + r * cols, wd + r * blocks, xq, xd,
                              bias ? bias + r : nullptr, y + r);
  }
  for (; r < rows; ++r) {
    gemv_block_q8_0<A, 1>(cols, wq + r * cols, wd + r * blocks, xq, xd, bias ? bias + r : nullptr,
                          y + r);
  }
}

// Panels of about 16 KB of weights, each multiplied by every vector. A row's result does not
// depend on the rows computed with it, so each vector gets the bits of gemv_q8_0.
template <class A>
void gemv_batch_q8_0(std::size_t rows, std::size_t cols, const int8_t* wq, const float* wd,
                     std::size_t n_vectors, const int8_t* xq, const float* xd, const float* bias,
                     float* y, std::size_t y_stride) {
  constexpr std::size_t kPanelBytes = 16 * 1024;
  const std::size_t blocks = cols / kQ8BlockSize;
  const std::size_t row_bytes = cols + sizeof(float) * blocks;
  const std::size_t panel = row_bytes < kPanelBytes ? kPanelBytes / row_bytes : 1;
  for (std::size_t r0 = 0; r0 < rows; r0 += panel) {
    const std::size_t n = rows - r0 < panel ? rows - r0 : panel;
    for (std::size_t v = 0; v < n_vectors; ++v) {
      gemv_q8_0<A>(n, cols, wq + r0 * cols, wd + r0 * blocks, xq + v * cols, xd + v * blocks,
                   bias ? bias + r0 : nullptr, y + v * y_stride + r0);
    }
  }
}

}  // namespace aft::kernels::simd
