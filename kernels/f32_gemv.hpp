// y[r] = dot(w[r, :], x) + bias[r], for one vector x (gemv_f32) or several (gemv_batch_f32, a
// batch of sequences decoding together); the same with bf16 weights W = uint16_t (gemv_bf16,
// gemv_batch_bf16), widened exactly as they are loaded. Single and batch run the same block: R rows
// by V vectors, each load of a weight serving V vectors and each load of x serving R rows; two
// column batches per step give two FMA chains per (row, vector), the last columns one zero-padded
// batch. A (row, vector) pair's sums run in the same order in every block shape, so gemv_batch_f32
// gives, vector by vector, the bits of gemv_f32 (and a bf16 GEMV the bits of the f32 GEMV of the
// widened weights). Single-threaded.
#pragma once

#include <algorithm>
#include <cstddef>

#include <xsimd/xsimd.hpp>

#include "kernels/simd_bf16.hpp"
#include "kernels/simd_partial.hpp"

namespace aft::kernels::simd {

// A batch of weights as floats.
template <class A>
xsimd::batch<float, A> load_weights(const float* p) {
  return xsimd::batch<float, A>::load_unaligned(p);
}
template <class A>
xsimd::batch<float, A> load_weights(const uint16_t* p) {
  return load_bf16<A>(p);
}

// Lanes [0, count) of a batch of weights, the others 0.
template <class A, class W>
xsimd::batch<float, A> load_weights_partial(const W* p, std::size_t count) {
  alignas(A::alignment()) W buf[xsimd::batch<float, A>::size] = {};
  for (std::size_t i = 0; i < count; ++i) buf[i] = p[i];
  return load_weights<A>(buf);
}

// Rows [r, r + R) for vectors [v, v + V): x of vector j at x + j * x_stride, its y likewise.
template <class A, std::size_t R, std::size_t V, class W>
[[gnu::always_inline]] inline void gemv_block(std::size_t cols, const W* w, const float* x,
                                              std::size_t x_stride, const float* bias, float* y,
                                              std::size_t y_stride) {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t L = B::size;
  const std::size_t cols2 = cols - cols % (2 * L);
  const std::size_t cols1 = cols - cols % L;
  B s[R][V], t[R][V];
  for (std::size_t i = 0; i < R; ++i) {
    for (std::size_t j = 0; j < V; ++j) s[i][j] = t[i][j] = B(0.0f);
  }
  std::size_t c = 0;
  for (; c < cols2; c += 2 * L) {
    B xa[V], xb[V];
    for (std::size_t j = 0; j < V; ++j) {
      xa[j] = B::load_unaligned(x + j * x_stride + c);
      xb[j] = B::load_unaligned(x + j * x_stride + c + L);
    }
    for (std::size_t i = 0; i < R; ++i) {
      const B wa = load_weights<A>(w + i * cols + c);
      const B wb = load_weights<A>(w + i * cols + c + L);
      for (std::size_t j = 0; j < V; ++j) {
        s[i][j] = xsimd::fma(wa, xa[j], s[i][j]);
        t[i][j] = xsimd::fma(wb, xb[j], t[i][j]);
      }
    }
  }
  for (; c < cols1; c += L) {
    for (std::size_t i = 0; i < R; ++i) {
      const B wa = load_weights<A>(w + i * cols + c);
      for (std::size_t j = 0; j < V; ++j) {
        s[i][j] = xsimd::fma(wa, B::load_unaligned(x + j * x_stride + c), s[i][j]);
      }
    }
  }
  // The tail as one more zero-padded batch: the same operations for either weight type, where a
  // scalar loop could be vectorized (products no longer fused) for one type and not the other.
  if (c < cols) {
    const std::size_t count = cols - c;
    B xt[V];
    for (std::size_t j = 0; j < V; ++j) xt[j] = load_partial<A>(x + j * x_stride + c, count, 0.0f);
    for (std::size_t i = 0; i < R; ++i) {
      const B wt = load_weights_partial<A>(w + i * cols + c, count);
      for (std::size_t j = 0; j < V; ++j) t[i][j] = xsimd::fma(wt, xt[j], t[i][j]);
    }
  }
  for (std::size_t i = 0; i < R; ++i) {
    for (std::size_t j = 0; j < V; ++j) {
      const float sum = xsimd::hadd(s[i][j] + t[i][j]);
      y[j * y_stride + i] = bias ? sum + bias[i] : sum;
    }
  }
}

// V vectors at a time over every row: groups of R rows, then one by one.
template <class A, std::size_t R, std::size_t V, class W>
inline void gemv_rows(std::size_t rows, std::size_t cols, const W* w, const float* x,
                      std::size_t x_stride, const float* bias, float* y, std::size_t y_stride) {
  std::size_t r = 0;
  for (; r + R <= rows; r += R) {
    gemv_block<A, R, V>(cols, w + r * cols, x, x_stride, bias ? bias + r : nullptr, y + r,
                        y_stride);
  }
  for (; r < rows; ++r) {
    gemv_block<A, 1, V>(cols, w + r * cols, x, x_stride, bias ? bias + r : nullptr, y + r,
                        y_stride);
  }
}

template <class A, class W>
void gemv(std::size_t rows, std::size_t cols, const W* w, const float* x, const float* bias,
          float* y) {
  gemv_rows<A, 4, 1>(rows, cols, w, x, 0, bias, y, 0);
}

// Rows are taken a panel at a time, so that their weights stay in L1 while every vector passes.
// Pairs of vectors with 32 vector registers (4 x 2 x 2 accumulators), one at a time with 16.
// (Measured on AVX-512 with 16 sequences: 2 rows x 4 vectors, 1 x 8 and 2 x 2 were no faster.)
template <class A, class W>
void gemv_batch(std::size_t rows, std::size_t cols, const W* w, std::size_t n_vectors,
                const float* x, std::size_t x_stride, const float* bias, float* y,
                std::size_t y_stride) {
  constexpr std::size_t kPair = xsimd::batch<float, A>::size >= 16 || XSIMD_WITH_NEON64 ? 2 : 1;
  constexpr std::size_t kPanelBytes = 16 * 1024;
  const std::size_t panel = std::max<std::size_t>(4, kPanelBytes / (cols * sizeof(W)) / 4 * 4);
  for (std::size_t r0 = 0; r0 < rows; r0 += panel) {
    const std::size_t n = std::min(panel, rows - r0);
    const W* wp = w + r0 * cols;
    const float* bp = bias ? bias + r0 : nullptr;
    std::size_t v = 0;
    for (; v + kPair <= n_vectors; v += kPair) {
      gemv_rows<A, 4, kPair>(n, cols, wp, x + v * x_stride, x_stride, bp, y + v * y_stride + r0,
                             y_stride);
    }
    for (; v < n_vectors; ++v) {
      gemv_rows<A, 4, 1>(n, cols, wp, x + v * x_stride, x_stride, bp, y + v * y_stride + r0,
                         y_stride);
    }
  }
}

}  // namespace aft::kernels::simd
