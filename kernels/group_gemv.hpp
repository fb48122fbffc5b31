// y[r] = dot(w[r, :], x) + bias[r] over weights packed in groups of 16 rows with the group's rows
// side by side (packed_weights.h: f32 column after column, bf16 pair of columns after pair), for
// one vector x (gemv_groups) or several (gemv_batch_groups, a batch of sequences decoding
// together). Rows in lanes: per step of columns, one load of each group's step serves every vector
// of the block, and the step's values of each vector, broadcast, serve every row; one chain of
// multiply-adds per (row register, vector) runs down the steps in order, and the bias is added
// last. No horizontal sums, no per-call cost but the stores, and each row's sum runs in the same
// order whatever the block's shape: gemv_batch_groups gives each vector the bits of gemv_groups.
// The weights and their products are a policy (Columns: F32Columns below, the bf16 ones in
// bf16_gemv.hpp). A pass of several blocks asks, as its blocks compute, for the next pass's
// weights in L2 (kPrefetchNext); one vector may ask L1 for its streams' lines a little ahead
// (kReadAheadLines). Single-threaded.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "kernels/kernels.h"
#include "kernels/simd_prefetch.hpp"
#include "kernels/simd_register.hpp"

namespace aft::kernels::simd {

// Rows per group, every packed type's.
constexpr std::size_t kGroupRows = kF32GroupRows;
static_assert(kBf16GroupRows == kGroupRows, "one group shape for f32 and bf16 weights");

// a * b + c, rounded once where the architecture has FMA. xsimd 8.1's fma on AVX-512 is a product
// and a sum that only the compiler's contraction fuses (not at -O1 under the sanitizers), so the
// intrinsic there: the same bits in every build.
template <class A>
[[gnu::always_inline]] inline xsimd::batch<float, A> fused_multiply_add(
    const xsimd::batch<float, A>& a, const xsimd::batch<float, A>& b,
    const xsimd::batch<float, A>& c) {
#if XSIMD_WITH_AVX512F
  if constexpr (std::is_base_of<xsimd::avx512f, A>::value) return _mm512_fmadd_ps(a, b, c);
#endif
  return xsimd::fma(a, b, c);
}

// A Columns policy says how a group's weights are stored and multiplied:
// - Value, Input: the packed weights' and the activations' element types.
// - kStepValues: the values of one step of a group (16 rows by the step's columns); kLaneValues:
//   one row's share of a step. steps(cols): the steps of a row. row_values(cols): the values a
//   row takes in the layout (a group starts at its first row times that).
// - W load(at): a register of a step's weights (its lanes' rows), ready to multiply;
//   X load_x(x, s): step s's activations of a vector, broadcast; madd(w, x, acc).
// - kTail, and where it is true has_tail(cols), tail_x and tail_madd: a last step of fewer
//   columns (bf16 weights by f32 activations, an odd count of columns).
// - kFloatsPerW: the float registers a W takes; kFloatsPerX: those of one vector's X with the
//   constants its products need (the block's shape below).
// - kGroupsAlone: the groups one vector takes at a time (its chains of multiply-adds, and its
//   streams of weights).

// f32 weights (packed_weights.h), a step one column.
template <class A>
struct F32Columns {
  using Value = float;
  using Input = float;
  using B = xsimd::batch<float, A>;
  using W = B;
  using X = B;
  static constexpr std::size_t kStepValues = kF32GroupRows;
  static constexpr std::size_t kLaneValues = 1;
  static constexpr bool kTail = false;
  static constexpr std::size_t kFloatsPerW = 1, kFloatsPerX = 1;
  // Two groups (two streams of weights; on AVX-512 two chains of multiply-adds, not one): on a
  // Zen 3's AVX2 one vector read 20-22 GB/s from memory against 15-18 for one group, enwik8 f32
  // decoded 1.04-1.37x faster on one thread; on a Zen 5's AVX-512 one vector in cache 1.5-1.8x,
  // the tiny model decoded 1.14-1.18x faster, from memory level (aft-gemv-bench, aft-bench,
  // docs/benchmarks.md). A Zen 4 had read 31-32 GB/s from memory with one group, 29 with two.
  static constexpr std::size_t kGroupsAlone = B::size >= 8 ? 2 : 1;
  static std::size_t steps(std::size_t cols) { return cols; }
  static std::size_t row_values(std::size_t cols) { return cols; }
  [[gnu::always_inline]] static W load(const float* at) { return B::load_unaligned(at); }
  [[gnu::always_inline]] static X load_x(const float* x, std::size_t s) { return B(x[s]); }
  [[gnu::always_inline]] static B madd(const W& w, const X& x, const B& acc) {
    return fused_multiply_add(w, x, acc);
  }
};

// Groups per pass and vectors per block. AVX-512 (measured on a Zen 4 with f32 weights,
// docs/benchmarks.md): 2 groups by 8 vectors, 16 accumulators, read 11-14 GB/s of weights from
// memory on one thread, 80-95% of the FMA peak. With 16 registers (AVX2, SSE2) a group's 2 or 4
// registers by as many vectors as leave room for the step's weights and one vector's activations
// (f32: 6 or 2; bf16 widened, two floats a weight register: 4 or 1); NEON's 32 registers, 6 or 5.
// One vector takes C::kGroupsAlone groups at a time, or as many as the registers hold (a weight
// register and an accumulator per row register).
template <class A, class C>
struct GroupBlocks {
  static constexpr std::size_t kLanes = xsimd::batch<float, A>::size;
  static constexpr std::size_t kRegisters = kGroupRows / kLanes;  // per group step
  static constexpr std::size_t kVectorRegisters = kLanes >= 16 || XSIMD_WITH_NEON64 ? 32 : 16;
  static constexpr std::size_t kGroups = kLanes >= 16 ? 2 : 1;
  static constexpr std::size_t kFit =
      (kVectorRegisters - kGroups * kRegisters * C::kFloatsPerW - C::kFloatsPerX) /
      (kGroups * kRegisters);
  static constexpr std::size_t kVectors = kFit < 8 ? kFit : 8;
  static constexpr std::size_t kFitAlone =
      (kVectorRegisters - C::kFloatsPerX) / (kRegisters * (C::kFloatsPerW + 1));
  static constexpr std::size_t kGroupsAlone =
      kFitAlone < C::kGroupsAlone ? kFitAlone : C::kGroupsAlone;
  // Whether a pass of more than kVectors vectors (several blocks, each reading the groups again)
  // prefetches the next pass's weights to L2 while its blocks compute: the first block otherwise
  // waits for memory in every pass. Measured on a Zen 5 (aft-gemv-bench 512 512 and 2048 512, 16
  // f32 vectors from memory): AVX-512 12.4 -> 22-23 GB/s, AVX2 8.9 -> 10.1-10.4, the same in
  // cache; SSE2 the same from memory and 12% slower in cache (a prefetch step per column of 4-lane
  // work).
  static constexpr bool kPrefetchNext = kLanes >= 8;
  // Whether f32 prompts take this kernel (KernelTable::f32_prompts_on_batch_gemv). Measured on a
  // Zen 5, enwik8-local pp512 against oneDNN 2.6's sgemm at the same ISA: AVX-512 1.13-1.18x at 1
  // thread, AVX2 level with it; SSE2, whose blocks hold 2 vectors, half its speed.
  static constexpr bool kTakesPrompts = kLanes >= 8;
};

// How far ahead one vector's steps ask L1 for their groups' lines where the table takes it
// (gemv_groups' kReadAhead): a group's step is one 64-byte line, so each step asks for the line 16
// steps on in each of its streams. A bf16 step has four operations on its line besides the load
// (two to widen, two multiply-adds), f32's one, and from memory the out-of-order window then
// reached fewer lines ahead than the hardware prefetchers need: on an Emerald Rapids one bf16
// vector read 13.0 GB/s from memory and 15.1 asking 16 lines ahead (as f32 reads), level in cache;
// 16 to 32 lines measured alike, f32 level with it (docs/benchmarks.md).
constexpr std::size_t kReadAheadLines = 16;

// G groups from the group at w (rows [0, rows) of them written, rows <= 16 G) for V vectors: x of
// vector j at x + j * x_stride, its y at y + j * y_stride. kPaced: see paced_share. ahead: for one
// vector, the steps ahead of each group's stream that a step asks L1 for (0: none).
template <class A, class C, std::size_t G, std::size_t V, bool kPaced>
[[gnu::always_inline]] inline void gemv_group_block(
    std::size_t cols, std::size_t row_values, const typename C::Value* w,
    const typename C::Input* x, std::size_t x_stride, const float* bias, std::size_t rows, float* y,
    std::size_t y_stride, Prefetch<A, PrefetchTo::kL2> next, std::size_t ahead) {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t L = B::size;
  constexpr std::size_t P = GroupBlocks<A, C>::kRegisters;
  constexpr std::size_t R = G * P;  // row registers
  const std::size_t group_stride = kGroupRows * row_values;
  const std::size_t steps = C::steps(cols);
  // Every loop over the block's registers is unrolled: where one stayed rolled (GCC 12: after the
  // steps on AVX2 and AVX-512, in the steps on NEON), it indexed acc by a variable and every
  // accumulator was kept on the stack (a load and a store per multiply-add).
  B acc[R][V];
#pragma GCC unroll 64
  for (std::size_t i = 0; i < R; ++i) {
#pragma GCC unroll 64
    for (std::size_t j = 0; j < V; ++j) acc[i][j] = B(0.0f);
  }
  // The weight is pinned to a register: left to itself, GCC folds its load into every
  // multiply-add (a load per product). Pinned as a local: pinned in the array, it was also stored
  // to the stack at every step.
  const auto load = [&](std::size_t s, typename C::W* wv) {
#pragma GCC unroll 64
    for (std::size_t i = 0; i < R; ++i) {
      typename C::W v =
          C::load(w + i / P * group_stride + s * C::kStepValues + i % P * L * C::kLaneValues);
      keep_in_register(v);
      wv[i] = v;
    }
  };
  const auto step = [&](std::size_t s) __attribute__((always_inline)) {
    typename C::W wv[R];
    load(s, wv);
#pragma GCC unroll 64
    for (std::size_t j = 0; j < V; ++j) {
      const typename C::X xv = C::load_x(x + j * x_stride, s);
#pragma GCC unroll 64
      for (std::size_t i = 0; i < R; ++i) acc[i][j] = C::madd(wv[i], xv, acc[i][j]);
    }
  };
  // The block's share of the next pass, from the first step: a line a step, or (kPaced) every
  // other step, the steps after its last line a loop of their own. A share (G groups over at least
  // G blocks) has no more lines than the block has steps, but in gemv_batch_f32_prefix, whose rows
  // are longer than the columns it reads: there a block asks for the first `steps` lines of its
  // share (all the next pass's columns in use where G is 1).
  const std::size_t asking = std::min(next.lines, steps);
  if (V == 1 && ahead > 0) {
    // Addresses as integers: the last steps ask for lines past the matrix, which is harmless for a
    // prefetch but not a pointer to form.
    constexpr std::size_t kStepBytes = C::kStepValues * sizeof(typename C::Value);
    const std::size_t group_bytes = group_stride * sizeof(typename C::Value);
    const std::uintptr_t first = reinterpret_cast<std::uintptr_t>(w) + ahead * kStepBytes;
    for (std::size_t s = 0; s < steps; ++s) {
#pragma GCC unroll 64
      for (std::size_t g = 0; g < G; ++g) {
        __builtin_prefetch(reinterpret_cast<const void*>(first + g * group_bytes + s * kStepBytes),
                           0, 3);
      }
      step(s);
    }
  } else if constexpr (kPaced) {
    std::size_t s = 0;
    for (std::size_t line = 0; line < asking; ++line) {
      next.line(line);
      step(s++);
      step(s++);
    }
    for (; s < steps; ++s) step(s);
  } else {
    for (std::size_t s = 0; s < steps; ++s) {
      if (s < asking) next.line(s);
      step(s);
    }
  }
  if constexpr (C::kTail) {
    if (C::has_tail(cols)) {
      typename C::W wv[R];
      load(steps, wv);
#pragma GCC unroll 64
      for (std::size_t j = 0; j < V; ++j) {
        const typename C::X xv = C::tail_x(x + j * x_stride, steps);
#pragma GCC unroll 64
        for (std::size_t i = 0; i < R; ++i) acc[i][j] = C::tail_madd(wv[i], xv, acc[i][j]);
      }
    }
  }
#pragma GCC unroll 64
  for (std::size_t j = 0; j < V; ++j) {
    float* out = y + j * y_stride;
    if (rows == R * L) {
#pragma GCC unroll 64
      for (std::size_t i = 0; i < R; ++i) {
        const B sum = bias ? acc[i][j] + B::load_unaligned(bias + i * L) : acc[i][j];
        sum.store_unaligned(out + i * L);
      }
      continue;
    }
    alignas(A::alignment()) float sums[R * L];
#pragma GCC unroll 64
    for (std::size_t i = 0; i < R; ++i) acc[i][j].store_aligned(sums + i * L);
    for (std::size_t r = 0; r < rows; ++r) out[r] = bias ? sums[r] + bias[r] : sums[r];
  }
}

// The block of n vectors, 1 <= n <= V: the instance of that count.
template <class A, class C, std::size_t G, std::size_t V, bool kPaced>
inline void gemv_group_vectors(std::size_t n, std::size_t cols, std::size_t row_values,
                               const typename C::Value* w, const typename C::Input* x,
                               std::size_t x_stride, const float* bias, std::size_t rows, float* y,
                               std::size_t y_stride, Prefetch<A, PrefetchTo::kL2> next,
                               std::size_t ahead) {
  if (n == V) {
    gemv_group_block<A, C, G, V, kPaced>(cols, row_values, w, x, x_stride, bias, rows, y, y_stride,
                                         next, ahead);
  } else if constexpr (V > 1) {
    gemv_group_vectors<A, C, G, V - 1, kPaced>(n, cols, row_values, w, x, x_stride, bias, rows, y,
                                               y_stride, next, ahead);
  }
}

// Whether a block asks for its share of the next pass a line every other step rather than a line a
// step: a share of a third to a half of the block's steps, as in a batch of 7 to 18 sequences on
// AVX2 (2 or 3 blocks a pass) or of 25 to 48 on AVX-512 (2 groups a pass, 4 to 6 blocks). A line
// a step there asks for the next pass faster than the core reads memory, for a third to a half of
// each block (measured on a Zen 3: 16 f32 sequences 1.02-1.28x at 1 thread paced, paired runs;
// AVX-512 not measured). A prompt's blocks (64 rows at a time: 11 a pass on AVX2) ask for short
// shares, and ran up to 14% slower paced. (A template on the architecture, like every function of
// the ISA files.)
template <class A>
bool paced_share(std::size_t lines, std::size_t steps) {
  return 3 * lines >= steps && 2 * lines <= steps;
}

// G groups for every vector, in blocks of at most V vectors as equal as can be (16 by 8: 8, 8; 13:
// 7, 6); the groups' weights stay in cache while the blocks pass.
template <class A, class C, std::size_t G, std::size_t V>
inline void gemv_group_pass(std::size_t cols, std::size_t row_values, const typename C::Value* w,
                            std::size_t n_vectors, const typename C::Input* x, std::size_t x_stride,
                            const float* bias, std::size_t rows, float* y, std::size_t y_stride,
                            const void* next, std::size_t next_bytes, std::size_t ahead) {
  const std::size_t blocks = (n_vectors + V - 1) / V;
  std::size_t v = 0;
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t n = n_vectors / blocks + (b < n_vectors % blocks ? 1 : 0);
    const auto share =
        Prefetch<A, PrefetchTo::kL2>::part_of(next, next_bytes, b, blocks, C::steps(cols));
    if (paced_share<A>(share.lines, C::steps(cols))) {
      gemv_group_vectors<A, C, G, V, true>(n, cols, row_values, w, x + v * x_stride, x_stride, bias,
                                           rows, y + v * y_stride, y_stride, share, ahead);
    } else {
      gemv_group_vectors<A, C, G, V, false>(n, cols, row_values, w, x + v * x_stride, x_stride,
                                            bias, rows, y + v * y_stride, y_stride, share, ahead);
    }
    v += n;
  }
}

// Passes of G groups, then one group at a time; the last group may hold fewer than 16 rows. Each
// row takes row_values values of the layout (C::row_values of the columns it was packed with, of
// which the first cols are multiplied). ahead: see gemv_group_block.
template <class A, class C, std::size_t G, std::size_t V>
void gemv_group_passes(std::size_t rows, std::size_t cols, std::size_t row_values,
                       const typename C::Value* w, std::size_t n_vectors,
                       const typename C::Input* x, std::size_t x_stride, const float* bias,
                       float* y, std::size_t y_stride, std::size_t ahead = 0) {
  constexpr std::size_t kRows = kGroupRows;
  // Passes of several blocks: each block asks for its share of the next pass's weights.
  const bool prefetch = GroupBlocks<A, C>::kPrefetchNext && n_vectors > V;
  const auto next_bytes = [&](std::size_t next_row, std::size_t pass_rows) {
    const std::size_t left = rows - std::min(rows, next_row);
    return prefetch ? std::min(pass_rows, left) * row_values * sizeof(typename C::Value) : 0;
  };
  std::size_t r = 0;
  for (; r + G * kRows <= rows; r += G * kRows) {
    const std::size_t next = r + G * kRows;
    gemv_group_pass<A, C, G, V>(cols, row_values, w + r * row_values, n_vectors, x, x_stride,
                                bias ? bias + r : nullptr, G * kRows, y + r, y_stride,
                                w + next * row_values, next_bytes(next, G * kRows), ahead);
  }
  for (; r < rows; r += kRows) {
    const std::size_t n = std::min(rows - r, kRows);
    const std::size_t next = r + kRows;
    gemv_group_pass<A, C, 1, V>(cols, row_values, w + r * row_values, n_vectors, x, x_stride,
                                bias ? bias + r : nullptr, n, y + r, y_stride,
                                w + next * row_values, next_bytes(next, kRows), ahead);
  }
}

template <class A, class C>
void gemv_batch_groups(std::size_t rows, std::size_t cols, const typename C::Value* w,
                       std::size_t n_vectors, const typename C::Input* x, std::size_t x_stride,
                       const float* bias, float* y, std::size_t y_stride) {
  using S = GroupBlocks<A, C>;
  gemv_group_passes<A, C, S::kGroups, S::kVectors>(rows, cols, C::row_values(cols), w, n_vectors, x,
                                                   x_stride, bias, y, y_stride);
}

template <class A>
void gemv_batch_f32_prefix(std::size_t rows, std::size_t cols, std::size_t packed_cols,
                           const float* w, std::size_t n_vectors, const float* x,
                           std::size_t x_stride, const float* bias, float* y,
                           std::size_t y_stride) {
  using S = GroupBlocks<A, F32Columns<A>>;
  gemv_group_passes<A, F32Columns<A>, S::kGroups, S::kVectors>(
      rows, cols, packed_cols, w, n_vectors, x, x_stride, bias, y, y_stride);
}

// kReadAhead: whether each step asks L1 for its groups' lines kReadAheadLines steps on (the
// table's choice, by CPU); either instance runs the same passes, with the same bits.
template <class A, class C, bool kReadAhead = false>
void gemv_groups(std::size_t rows, std::size_t cols, const typename C::Value* w,
                 const typename C::Input* x, const float* bias, float* y) {
  gemv_group_passes<A, C, GroupBlocks<A, C>::kGroupsAlone, 1>(
      rows, cols, C::row_values(cols), w, 1, x, 0, bias, y, 0, kReadAhead ? kReadAheadLines : 0);
}

}  // namespace aft::kernels::simd
