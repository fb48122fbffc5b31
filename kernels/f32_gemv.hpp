// y[r] = dot(w[r, :], x) + bias[r] over packed bf16 weights (gemv_bf16, gemv_batch_bf16,
// packed_weights.h), widened exactly as they are loaded, for one vector or several (a batch of
// sequences decoding together). Single and batch run the same micro-kernel: R rows by V vectors,
// each load of a weight serving V vectors and each load of x serving R rows, one FMA chain per
// (row, vector) over the column batches, the last columns one zero-padded batch, then a horizontal
// sum. A (row, vector) pair's sums run in the same order in every block shape and either layout
// (packed, or a batch's rows widened once into row-major f32, F32Rows), so gemv_batch_bf16 gives,
// vector by vector, the bits of gemv_bf16. bf16_gemv.hpp runs the same micro-kernel over other
// products (bf16 activations). f32 weights have a layout and kernel of their own
// (f32_group_gemv.hpp). Single-threaded.
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "kernels/kernels.h"
#include "kernels/simd_partial.hpp"
#include "kernels/simd_prefetch.hpp"
#include "kernels/simd_register.hpp"
#include "kernels/thread_scratch.h"

namespace aft::kernels::simd {

// The products of f32 activations: a column batch of x (Input) is kStep floats (X), multiplied
// and added by one FMA per lane.
template <class A>
struct FloatInputProducts {
  using Input = float;
  using B = xsimd::batch<float, A>;
  using X = B;
  static constexpr std::size_t kStep = B::size;
  static constexpr bool kWholeBatches = false;  // the last columns may be a partial batch
  // Prefetched to L2: measured on a Zen 4 (aft-gemv-bench, weights from memory), one vector read
  // 18-20 GB/s and 16 vectors 8-9, against 10-12 and 7 to L1; enwik8 f32 decoded 15-25% faster
  // alone and 12-40% in batches of 16 (docs/benchmarks.md).
  static constexpr PrefetchTo kPrefetchTo = PrefetchTo::kL2;
  // Two column batches per turn of the loop where registers allow (gemv_batches_per_turn).
  static constexpr std::size_t kBatchesPerTurn = 2;
  static X load_x(const float* x, std::size_t c) { return B::load_unaligned(x + c); }
  static X load_x_tail(const float* x, std::size_t c, std::size_t count) {
    return load_partial<A>(x + c, count, 0.0f);
  }
  static B madd(const B& w, const X& x, const B& acc) { return xsimd::fma(w, x, acc); }
};

// The weights as the GEMV reads them: load(r, c), the batch of row r from column c (a multiple of
// Products::kStep), as Products::madd multiplies it by Products::load_x(x, c); load_tail(r, c,
// count), its first count columns and zeros; row(r), where row r starts (the rows of a block of
// rows follow it contiguously); span(), the columns the batches cover; kGroupRows, the rows that
// a block of rows must hold a multiple of; kRowsAlone and kPrefetchAlone, the block of rows of
// one vector and whether it prefetches the next block (batches always do). Row-major f32: a bf16
// batch's rows, widened once for all its blocks of vectors.
template <class A>
struct F32Rows {
  using Value = float;
  using Products = FloatInputProducts<A>;
  using B = xsimd::batch<float, A>;
  static constexpr std::size_t kGroupRows = 1;
  const float* w;
  std::size_t cols;
  std::size_t span() const { return cols; }
  const void* row(std::size_t r) const { return w + r * cols; }
  B load(std::size_t r, std::size_t c) const { return B::load_unaligned(w + r * cols + c); }
  B load_tail(std::size_t r, std::size_t c, std::size_t count) const {
    return load_partial<A>(w + r * cols + c, count, 0.0f);
  }
};
// Packed bf16 (packed_weights.h): a batch never crosses a 32-column chunk, and its weights are
// one half of the chunk's pairs, made floats by a shift (the first half) or a mask (the second).
template <class A>
struct Bf16PackedRows {
  using Value = uint16_t;
  using Products = FloatInputProducts<A>;
  using B = xsimd::batch<float, A>;
  using U = xsimd::batch<uint32_t, A>;
  static constexpr std::size_t kHalf = kBf16ChunkCols / 2;
  static_assert(U::size <= kHalf, "a batch is within one half of a chunk");
  static constexpr std::size_t kGroupRows = kBf16GroupRows;
  // One vector: blocks of 8 rows, whose 8 independent FMA chains keep enough loads in flight, and
  // the next rows' weights prefetched (simd_prefetch.hpp). One group at a time without the
  // prefetch, one stream as F32Rows reads, decoded the 430M shape in bf16 no faster on a Zen 4
  // (AFT_ISA=avx512: 25.9 against 26.0 ms a token at 1 thread, 29 GB/s either way).
  static constexpr std::size_t kRowsAlone = 8;
  static constexpr bool kPrefetchAlone = true;
  const uint16_t* w;
  std::size_t cols;
  std::size_t span() const { return cols; }
  const uint16_t* chunk(std::size_t r, std::size_t c) const {
    return w +
           ((r / kBf16GroupRows * (bf16_packed_cols(cols) / kBf16ChunkCols) + c / kBf16ChunkCols) *
                kBf16GroupRows +
            r % kBf16GroupRows) *
               kBf16ChunkCols;
  }
  const void* row(std::size_t r) const { return chunk(r, 0); }
  B load(std::size_t r, std::size_t c) const {
    const std::size_t j = c % kBf16ChunkCols;
    const U pairs = U::load_unaligned(reinterpret_cast<const uint32_t*>(chunk(r, c)) + j % kHalf);
    return xsimd::bitwise_cast<B>(j < kHalf ? pairs << 16 : pairs & U(0xffff0000u));
  }
  // The chunk's columns past the matrix are zeros.
  B load_tail(std::size_t r, std::size_t c, std::size_t) const { return load(r, c); }
};

// Column batches per turn of a block's loop (and per prefetch step) for V vectors: two halve the
// loop's and the prefetch's overhead where registers allow (V <= 2: AVX2, SSE2) and the products
// ask for it (P::kBatchesPerTurn); at 4 x 6 (AVX-512, NEON) GCC would interleave the two batches'
// loads and spill accumulators.
template <class P>
constexpr std::size_t gemv_batches_per_turn(std::size_t vectors) {
  return vectors <= 2 ? P::kBatchesPerTurn : 1;
}

// Rows [r, r + R) for vectors [v, v + V): x of vector j at x + j * x_stride, its y likewise.
// The micro-kernel: per column batch, the V vectors' x and then each row's weights are loaded
// once into registers and serve R x V FMAs, one accumulator per (row, vector).
template <class A, std::size_t R, std::size_t V, class Rows>
[[gnu::always_inline]] inline void gemv_block(const Rows& w, std::size_t r,
                                              const typename Rows::Products::Input* x,
                                              std::size_t x_stride, const float* bias, float* y,
                                              std::size_t y_stride,
                                              Prefetch<A, Rows::Products::kPrefetchTo> prefetch) {
  using B = xsimd::batch<float, A>;
  using P = typename Rows::Products;
  using X = typename P::X;
  constexpr std::size_t L = P::kStep;
  static_assert(kBf16ChunkCols % L == 0, "a batch stays within a chunk of packed bf16");
  const std::size_t span = w.span();
  const std::size_t cols1 = span - span % L;
  B acc[R][V];
  for (std::size_t i = 0; i < R; ++i) {
    for (std::size_t j = 0; j < V; ++j) acc[i][j] = B(0.0f);
  }
  // One column batch: V loads of x, then each row's weights loaded once for V products. The
  // weight is pinned to a register: left to itself, GCC folds its load into every FMA (a load per
  // FMA).
  const auto step = [&](std::size_t c) [[gnu::always_inline]] {
    X xv[V];
    for (std::size_t j = 0; j < V; ++j) xv[j] = P::load_x(x + j * x_stride, c);
    for (std::size_t i = 0; i < R; ++i) {
      auto wv = w.load(r + i, c);
      keep_in_register(wv);
      for (std::size_t j = 0; j < V; ++j) acc[i][j] = P::madd(wv, xv[j], acc[i][j]);
    }
  };
  constexpr std::size_t kTurn = gemv_batches_per_turn<P>(V);
  std::size_t c = 0;
  for (; c + kTurn * L <= cols1; c += kTurn * L) {
    for (std::size_t u = 0; u < kTurn; ++u) step(c + u * L);
    prefetch.step();
  }
  for (; c < cols1; c += L) step(c);
  // The tail as one more zero-padded batch: the same operations for either weight type, where a
  // scalar loop could be vectorized (products no longer fused) for one type and not the other.
  if constexpr (!P::kWholeBatches) {
    if (c < span) {
      const std::size_t count = span - c;
      X xt[V];
      for (std::size_t j = 0; j < V; ++j) xt[j] = P::load_x_tail(x + j * x_stride, c, count);
      for (std::size_t i = 0; i < R; ++i) {
        const auto wt = w.load_tail(r + i, c, count);
        for (std::size_t j = 0; j < V; ++j) acc[i][j] = P::madd(wt, xt[j], acc[i][j]);
      }
    }
  }
  for (std::size_t i = 0; i < R; ++i) {
    for (std::size_t j = 0; j < V; ++j) {
      const float sum = xsimd::hadd(acc[i][j]);
      y[j * y_stride + i] = bias ? sum + bias[i] : sum;
    }
  }
}

// The last n < V vectors of rows [r, r + R), in one block of n.
template <class A, std::size_t R, std::size_t V, class Rows>
inline void gemv_block_rest(std::size_t n, const Rows& w, std::size_t r,
                            const typename Rows::Products::Input* x, std::size_t x_stride,
                            const float* bias, float* y, std::size_t y_stride,
                            Prefetch<A, Rows::Products::kPrefetchTo> prefetch) {
  if constexpr (V > 1) {
    if (n == V - 1) {
      gemv_block<A, R, V - 1>(w, r, x, x_stride, bias, y, y_stride, prefetch);
    } else {
      gemv_block_rest<A, R, V - 1>(n, w, r, x, x_stride, bias, y, y_stride, prefetch);
    }
  }
}

// Rows [r, r + R) for every vector, in blocks of at most V vectors as equal as can be (16 by 6:
// 6, 5, 5; a block of one runs at the latency of its R chains). The rows' weights stay
// in L1 while the vectors pass; meanwhile the blocks ask, a share each, for the next rows' weights
// (next, bytes: contiguous in either layout), so that the first pass over them need not wait for
// memory.
template <class A, std::size_t R, std::size_t V, class Rows>
inline void gemv_row_block(const Rows& w, std::size_t r, std::size_t n_vectors,
                           const typename Rows::Products::Input* x, std::size_t x_stride,
                           const float* bias, float* y, std::size_t y_stride, const char* next,
                           std::size_t next_bytes) {
  const std::size_t blocks = (n_vectors + V - 1) / V;
  std::size_t v = 0;
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t n = n_vectors / blocks + (b < n_vectors % blocks ? 1 : 0);
    using P = typename Rows::Products;
    const std::size_t turns = w.span() / (gemv_batches_per_turn<P>(n) * P::kStep);
    const auto prefetch = Prefetch<A, P::kPrefetchTo>::part_of(next, next_bytes, b, blocks, turns);
    if (n == V) {
      gemv_block<A, R, V>(w, r, x + v * x_stride, x_stride, bias, y + v * y_stride, y_stride,
                          prefetch);
    } else {
      gemv_block_rest<A, R, V>(n, w, r, x + v * x_stride, x_stride, bias, y + v * y_stride,
                               y_stride, prefetch);
    }
    v += n;
  }
}

// 4 rows per block: a packed bf16 group, read as one stream.
constexpr std::size_t kGemvRows = kBf16GroupRows;

// Vectors per block of a batch: 4 x 6 accumulators, 6 x and a weight in 32 vector registers
// (AVX-512, NEON); 4 x 2 in 16 (AVX2, SSE2): 4 x 3 + 3 + 1 would fill all 16, and GCC then
// keeps one accumulator on the stack, a store and a load per FMA (measured 35% slower).
template <class A>
constexpr std::size_t gemv_batch_vectors() {
  return xsimd::batch<float, A>::size >= 16 || XSIMD_WITH_NEON64 ? 6 : 2;
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
    for (; c + L <= cols; c += L) packed.load(r, c).store_unaligned(row + c);
    if (c < cols) store_partial<A>(packed.load(r, c), row + c, cols - c);
  }
}

// Blocks of R rows, then one by one. A (row, vector) pair sums in the same order in every block
// shape, so gemv_batch gives each vector the bits of gemv.
template <class A, std::size_t R, class Rows>
void gemv_rows(std::size_t rows, std::size_t cols, const typename Rows::Value* w,
               std::size_t n_vectors, const typename Rows::Products::Input* x, std::size_t x_stride,
               const float* bias, float* y, std::size_t y_stride) {
  static_assert(R % Rows::kGroupRows == 0, "a block is whole groups of the layout's rows");
  constexpr std::size_t V = gemv_batch_vectors<A>();
  const Rows weights{w, cols};
  const std::size_t block_bytes =
      static_cast<const char*>(weights.row(R)) - reinterpret_cast<const char*>(w);
  std::size_t r = 0;
  for (; r + R <= rows; r += R) {
    const bool more = (n_vectors > 1 || Rows::kPrefetchAlone) && r + 2 * R <= rows;
    const char* next = more ? static_cast<const char*>(weights.row(r + R)) : nullptr;
    const float* b = bias ? bias + r : nullptr;
    if constexpr (std::is_same<Rows, Bf16PackedRows<A>>::value) {
      // More vectors than a block takes: widen the rows once for all the blocks, not per block
      // (a shift or mask per weight batch and block); exact, so the same bits.
      if (n_vectors > V) {
        float* wide = static_cast<float*>(thread_scratch(R * cols * sizeof(float)));
        widen_bf16_rows<A>(R, cols, static_cast<const uint16_t*>(weights.row(r)), wide);
        gemv_row_block<A, R, V>(F32Rows<A>{wide, cols}, 0, n_vectors, x, x_stride, b, y + r,
                                y_stride, next, more ? block_bytes : 0);
        continue;
      }
    }
    gemv_row_block<A, R, V>(weights, r, n_vectors, x, x_stride, b, y + r, y_stride, next,
                            more ? block_bytes : 0);
  }
  for (; r < rows; ++r) {
    gemv_row_block<A, 1, V>(weights, r, n_vectors, x, x_stride, bias ? bias + r : nullptr, y + r,
                            y_stride, nullptr, 0);
  }
}

template <class A, class Rows>
void gemv_batch(std::size_t rows, std::size_t cols, const typename Rows::Value* w,
                std::size_t n_vectors, const typename Rows::Products::Input* x,
                std::size_t x_stride, const float* bias, float* y, std::size_t y_stride) {
  gemv_rows<A, kGemvRows, Rows>(rows, cols, w, n_vectors, x, x_stride, bias, y, y_stride);
}

// One vector: blocks of Rows::kRowsAlone rows.
template <class A, class Rows>
void gemv(std::size_t rows, std::size_t cols, const typename Rows::Value* w,
          const typename Rows::Products::Input* x, const float* bias, float* y) {
  gemv_rows<A, Rows::kRowsAlone, Rows>(rows, cols, w, 1, x, 0, bias, y, 0);
}

}  // namespace aft::kernels::simd
