// The GEMVs of packed bf16 weights (packed_weights.h: groups of 16 rows, pair of columns after
// pair, the group's rows side by side), as Columns policies of group_gemv.hpp: a step is a pair of
// columns, a 64-byte line of 16 rows.
//
// Bf16Columns: by f32 activations (gemv_bf16), the pair's halves widened exactly to floats (a
// shift, a mask) and multiplied by the broadcast x[2p], then x[2p + 1]: each row's sum is the
// sequential one over its columns, the sum gemv_f32 takes of the same values.
//
// Bf16PairColumns: by activations rounded to bf16 (gemv_bf16_bf16, the matrix units' arithmetic,
// for decode and batches where prompts run on the units, matmul.h, so that a bf16 model's every
// product takes the same inputs), the pair of activations broadcast as a 32-bit lane: per lane,
// acc + w[2p + 1] x[2p + 1], rounded, then + w[2p] x[2p], rounded, as AVX512-BF16's vdpbf16ps
// does (products of two bf16 values are exact in f32). A table whose CPU has that instruction
// takes it (the avx512dq specialization below); the others compute the same sums with two FMAs of
// the widened halves. Single-threaded.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "kernels/group_gemv.hpp"
#include "kernels/kernels.h"
#include "kernels/simd_partial.hpp"

namespace aft::kernels::simd {

// A pair of columns of a register's rows (or a broadcast pair of activations), both halves
// widened to floats: even holds column 2p, odd column 2p + 1.
template <class A>
struct WidenedPairs {
  xsimd::batch<float, A> even, odd;
};

template <class A>
[[gnu::always_inline]] inline void keep_in_register(WidenedPairs<A>& v) {
  keep_in_register(v.even);
  keep_in_register(v.odd);
}

// u's bits as floats. On NEON the intrinsic itself: xsimd 11's bitwise_cast there calls a
// function per cast that GCC 12 leaves out of line in the GEMV's steps, spilling its accumulators.
template <class A>
[[gnu::always_inline]] inline xsimd::batch<float, A> float_bits(
    const xsimd::batch<uint32_t, A>& u) {
#if XSIMD_WITH_NEON64
  if constexpr (std::is_same<A, xsimd::neon64>::value) return vreinterpretq_f32_u32(u.data);
#endif
  return xsimd::bitwise_cast<xsimd::batch<float, A>>(u);
}

template <class A>
[[gnu::always_inline]] inline WidenedPairs<A> widen_pairs(const xsimd::batch<uint32_t, A>& pairs) {
  using U = xsimd::batch<uint32_t, A>;
  return {float_bits<A>(pairs << 16), float_bits<A>(pairs & U(0xffff0000u))};
}

// What the bf16 policies share: the layout (group_gemv.hpp describes the members).
struct Bf16Layout {
  using Value = uint16_t;
  static constexpr std::size_t kStepValues = 2 * kBf16GroupRows;
  static constexpr std::size_t kLaneValues = 2;
  static std::size_t row_values(std::size_t cols) { return bf16_packed_cols(cols); }
  // One vector: 4 chains, where one waited on the latency of its multiply-adds (measured on a
  // Sapphire Rapids, aft-gemv-bench 512 512 avx512bf16, one vector: 50-68 GFLOP/s in cache
  // against 20-26 with one group, 13-16 GB/s from 128 MB of weights against 9.5-9.6).
  static constexpr std::size_t kGroupsAlone = 4;
};

// Weights widened as they are loaded (the tables without vdpbf16ps).
template <class A>
struct Bf16Widened : Bf16Layout {
  using B = xsimd::batch<float, A>;
  using U = xsimd::batch<uint32_t, A>;
  using W = WidenedPairs<A>;
  using X = WidenedPairs<A>;
  static constexpr std::size_t kFloatsPerW = 2, kFloatsPerX = 3;
  [[gnu::always_inline]] static W load(const uint16_t* at) {
    return widen_pairs<A>(U::load_unaligned(reinterpret_cast<const uint32_t*>(at)));
  }
};

// By f32 activations: whole pairs, then column cols - 1 alone where cols is odd.
template <class A>
struct Bf16Columns : Bf16Widened<A> {
  using Input = float;
  using B = xsimd::batch<float, A>;
  using W = WidenedPairs<A>;
  using X = WidenedPairs<A>;
  static constexpr bool kTail = true;
  static std::size_t steps(std::size_t cols) { return cols / 2; }
  static bool has_tail(std::size_t cols) { return cols % 2 != 0; }
  [[gnu::always_inline]] static X load_x(const float* x, std::size_t s) {
    return {B(x[2 * s]), B(x[2 * s + 1])};
  }
  [[gnu::always_inline]] static B madd(const W& w, const X& x, const B& acc) {
    return fused_multiply_add(w.odd, x.odd, fused_multiply_add(w.even, x.even, acc));
  }
  [[gnu::always_inline]] static X tail_x(const float* x, std::size_t s) {
    return {B(x[2 * s]), B(0.0f)};
  }
  [[gnu::always_inline]] static B tail_madd(const W& w, const X& x, const B& acc) {
    return fused_multiply_add(w.even, x.even, acc);
  }
};

// A pair of bf16 activations as a 32-bit lane (a template, as every function of the ISA files).
template <class A>
uint32_t bf16_pair(const uint16_t* xb, std::size_t s) {
  uint32_t pair;
  std::memcpy(&pair, xb + 2 * s, sizeof pair);
  return pair;
}

// By bf16 activations (round_bf16's, zeros past the last column): every pair, column 2p + 1's
// product first.
template <class A>
struct Bf16PairColumns : Bf16Widened<A> {
  using Input = uint16_t;
  using B = xsimd::batch<float, A>;
  using U = xsimd::batch<uint32_t, A>;
  using W = WidenedPairs<A>;
  using X = WidenedPairs<A>;
  static constexpr bool kTail = false;
  static std::size_t steps(std::size_t cols) { return (cols + 1) / 2; }
  [[gnu::always_inline]] static X load_x(const uint16_t* xb, std::size_t s) {
    return widen_pairs<A>(U(bf16_pair<A>(xb, s)));
  }
  [[gnu::always_inline]] static B madd(const W& w, const X& x, const B& acc) {
    return fused_multiply_add(w.even, x.even, fused_multiply_add(w.odd, x.odd, acc));
  }
};

#if defined(__AVX512BF16__)
// vdpbf16ps, in the table of CPUs with AVX512-BF16 (isa_avx512bf16.cpp): instantiated for
// xsimd::avx512dq, an architecture no other table uses (README.md).
template <>
struct Bf16PairColumns<xsimd::avx512dq> : Bf16Layout {
  using Input = uint16_t;
  using B = xsimd::batch<float, xsimd::avx512dq>;
  using U = xsimd::batch<uint32_t, xsimd::avx512dq>;
  using W = U;
  using X = U;
  static constexpr bool kTail = false;
  static constexpr std::size_t kFloatsPerW = 1, kFloatsPerX = 1;
  static std::size_t steps(std::size_t cols) { return (cols + 1) / 2; }
  [[gnu::always_inline]] static W load(const uint16_t* at) {
    return U::load_unaligned(reinterpret_cast<const uint32_t*>(at));
  }
  [[gnu::always_inline]] static X load_x(const uint16_t* xb, std::size_t s) {
    return U(bf16_pair<xsimd::avx512dq>(xb, s));
  }
  [[gnu::always_inline]] static B madd(const W& w, const X& x, const B& acc) {
    return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(w.data),
                            reinterpret_cast<__m512bh>(x.data));
  }
};
#endif

// x[0, cols) rounded to bf16 (to nearest, ties to even; a NaN stays a quiet NaN, as f32_to_bf16)
// into xb[0, bf16_packed_cols(cols)), zeros past cols.
template <class A>
void round_bf16(std::size_t cols, const float* x, uint16_t* xb) {
  using B = xsimd::batch<float, A>;
  using U = xsimd::batch<uint32_t, A>;
  using I = xsimd::batch<int32_t, A>;
  constexpr std::size_t L = U::size;
  const std::size_t whole = cols - cols % L;
  // Rounded in 32-bit lanes, then narrowed.
  const auto round = [&](std::size_t c, const B& v) {
    const U bits = xsimd::bitwise_cast<U>(v);
    const U rounded = (bits + U(0x7fffu) + ((bits >> 16) & U(1u))) >> 16;
    const U nan = xsimd::bitwise_cast<U>(
        xsimd::select(xsimd::bitwise_cast<I>(bits & U(0x7fffffffu)) > I(0x7f800000), I(-1), I(0)));
    store_low_halves<A>(rounded ^ ((rounded ^ ((bits >> 16) | U(0x40u))) & nan), xb + c);
  };
  std::size_t c = 0;
#if defined(__AVX512BF16__)
  if constexpr (std::is_same_v<A, xsimd::avx512dq>) {
    // vcvtne2ps2bf16: 32 values an instruction where the lanes took about 10 for 16 (4-5% of a
    // bf16 prompt on the tiles), the same rounding and NaNs, but a subnormal input becomes a zero:
    // a pair of batches with one (vfpclassps) takes the lanes' way.
    for (; c + 2 * L <= whole; c += 2 * L) {
      const __m512 low = _mm512_loadu_ps(x + c), high = _mm512_loadu_ps(x + c + L);
      constexpr int kSubnormal = 0x20;
      if ((_mm512_fpclass_ps_mask(low, kSubnormal) | _mm512_fpclass_ps_mask(high, kSubnormal)) !=
          0) {
        round(c, B(low));
        round(c + L, B(high));
        continue;
      }
      _mm512_storeu_si512(xb + c, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(high, low)));
    }
  }
#endif
  for (; c < whole; c += L) round(c, B::load_unaligned(x + c));
  if (c < cols) {
    round(c, load_partial<A>(x + c, cols - c, 0.0f));
    c += L;
  }
  std::fill(xb + c, xb + bf16_packed_cols(cols), uint16_t{0});
}

}  // namespace aft::kernels::simd
