// y[r] = dot(w[r, :], x) + bias[r], for one vector x (gemv_f32) or several (gemv_batch_f32, a
// batch of sequences decoding together); the same with packed bf16 weights (gemv_bf16,
// gemv_batch_bf16, packed_weights.h), widened exactly as they are loaded. Single and batch run the
// same block: R rows by V vectors, each load of a weight serving V vectors and each load of x
// serving R rows; two column batches per step give two FMA chains per (row, vector), the last
// columns one zero-padded batch. A (row, vector) pair's sums run in the same order in every block
// shape and either layout, so gemv_batch_f32 gives, vector by vector, the bits of gemv_f32 (and a
// bf16 GEMV the bits of the f32 GEMV of the widened weights). Single-threaded.
#pragma once

#include <algorithm>
#include <cstddef>

#include <xsimd/xsimd.hpp>

#include "kernels/kernels.h"
#include "kernels/simd_bf16.hpp"
#include "kernels/simd_partial.hpp"

namespace aft::kernels::simd {

// Where weight (r, c) is, for c a multiple of the batch size (a batch's weights are contiguous).
// Row-major f32, as the model file stores them and the matrix products read them.
template <class A>
struct F32Rows {
  using Value = float;
  const float* w;
  std::size_t cols;
  const float* at(std::size_t r, std::size_t c) const { return w + r * cols + c; }
};
// Packed bf16 (packed_weights.h): a batch never crosses a 32-column chunk.
template <class A>
struct Bf16PackedRows {
  using Value = uint16_t;
  const uint16_t* w;
  std::size_t cols;
  const uint16_t* at(std::size_t r, std::size_t c) const {
    return w +
           ((r / kBf16GroupRows * (bf16_packed_cols(cols) / kBf16ChunkCols) + c / kBf16ChunkCols) *
                kBf16GroupRows +
            r % kBf16GroupRows) *
               kBf16ChunkCols +
           c % kBf16ChunkCols;
  }
};

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
template <class A, std::size_t R, std::size_t V, class Rows>
[[gnu::always_inline]] inline void gemv_block(const Rows& w, std::size_t r, const float* x,
                                              std::size_t x_stride, const float* bias, float* y,
                                              std::size_t y_stride) {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t L = B::size;
  static_assert(kBf16ChunkCols % (2 * L) == 0, "a step stays within a chunk of packed bf16");
  const std::size_t cols = w.cols;
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
      const B wa = load_weights<A>(w.at(r + i, c));
      const B wb = load_weights<A>(w.at(r + i, c + L));
      for (std::size_t j = 0; j < V; ++j) {
        s[i][j] = xsimd::fma(wa, xa[j], s[i][j]);
        t[i][j] = xsimd::fma(wb, xb[j], t[i][j]);
      }
    }
  }
  for (; c < cols1; c += L) {
    for (std::size_t i = 0; i < R; ++i) {
      const B wa = load_weights<A>(w.at(r + i, c));
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
      const B wt = load_weights_partial<A>(w.at(r + i, c), count);
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

// V vectors at a time over rows [r0, r0 + rows): groups of R rows, then one by one.
template <class A, std::size_t R, std::size_t V, class Rows>
inline void gemv_rows(const Rows& w, std::size_t r0, std::size_t rows, const float* x,
                      std::size_t x_stride, const float* bias, float* y, std::size_t y_stride) {
  std::size_t r = 0;
  for (; r + R <= rows; r += R) {
    gemv_block<A, R, V>(w, r0 + r, x, x_stride, bias ? bias + r : nullptr, y + r, y_stride);
  }
  for (; r < rows; ++r) {
    gemv_block<A, 1, V>(w, r0 + r, x, x_stride, bias ? bias + r : nullptr, y + r, y_stride);
  }
}

// 4 rows per pass: a packed bf16 group, read as one stream.
constexpr std::size_t kGemvRows = kBf16GroupRows;

template <class A, class Rows>
void gemv(std::size_t rows, std::size_t cols, const typename Rows::Value* w, const float* x,
          const float* bias, float* y) {
  gemv_rows<A, kGemvRows, 1>(Rows{w, cols}, 0, rows, x, 0, bias, y, 0);
}

// Rows are taken a panel at a time, so that their weights stay in L1 while every vector passes.
// Pairs of vectors with 32 vector registers (4 x 2 x 2 accumulators), one at a time with 16.
// (Measured on AVX-512 with 16 sequences: 2 rows x 4 vectors, 1 x 8 and 2 x 2 were no faster.)
template <class A, class Rows>
void gemv_batch(std::size_t rows, std::size_t cols, const typename Rows::Value* w,
                std::size_t n_vectors, const float* x, std::size_t x_stride, const float* bias,
                float* y, std::size_t y_stride) {
  using W = typename Rows::Value;
  constexpr std::size_t kPair = xsimd::batch<float, A>::size >= 16 || XSIMD_WITH_NEON64 ? 2 : 1;
  constexpr std::size_t kPanelBytes = 16 * 1024;
  const std::size_t panel =
      std::max<std::size_t>(kGemvRows, kPanelBytes / (cols * sizeof(W)) / kGemvRows * kGemvRows);
  const Rows weights{w, cols};
  for (std::size_t r0 = 0; r0 < rows; r0 += panel) {
    const std::size_t n = std::min(panel, rows - r0);
    const float* bp = bias ? bias + r0 : nullptr;
    std::size_t v = 0;
    for (; v + kPair <= n_vectors; v += kPair) {
      gemv_rows<A, kGemvRows, kPair>(weights, r0, n, x + v * x_stride, x_stride, bp,
                                     y + v * y_stride + r0, y_stride);
    }
    for (; v < n_vectors; ++v) {
      gemv_rows<A, kGemvRows, 1>(weights, r0, n, x + v * x_stride, x_stride, bp,
                                 y + v * y_stride + r0, y_stride);
    }
  }
}

// The packed bf16 rows widened, row by row, batch by batch within each chunk.
template <class A>
void widen_bf16_rows(std::size_t rows, std::size_t cols, const uint16_t* w, float* x) {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t L = B::size;
  const Bf16PackedRows<A> packed{w, cols};
  for (std::size_t r = 0; r < rows; ++r) {
    float* row = x + r * cols;
    std::size_t c = 0;
    for (; c + L <= cols; c += L) load_bf16<A>(packed.at(r, c)).store_unaligned(row + c);
    for (; c < cols; ++c) row[c] = bf16_value<A>(*packed.at(r, c));
  }
}

}  // namespace aft::kernels::simd
