// bf16 weights times activations rounded to bf16, summed in f32: the matrix units' arithmetic,
// for decode and batches where prompts run on the units (matmul.h), so that a bf16 model's every
// product takes the same inputs. The activations are rounded once per row (round_bf16_pairs) into
// the layout of a packed weight row (packed_weights.h: per 32-column chunk, columns j and j + 16
// side by side in a 32-bit lane, zeros past the last column), and the GEMV micro-kernel of
// f32_gemv.hpp multiplies lane by lane: per lane, acc + w[j + 16] x[j + 16], rounded, then + w[j]
// x[j], rounded, as AVX512-BF16's vdpbf16ps does (products of two bf16 values are exact in f32).
// A table whose CPU has that instruction takes it (Bf16PairProducts below); the others compute
// the same sums with two FMAs of the widened halves. Single-threaded.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <xsimd/xsimd.hpp>

#include "kernels/f32_gemv.hpp"
#include "kernels/kernels.h"
#include "kernels/simd_partial.hpp"

namespace aft::kernels::simd {

// A batch of pairs, both halves widened to floats: hi holds columns j + 16, lo columns j.
template <class A>
struct WidenedPairs {
  xsimd::batch<float, A> hi, lo;
};

template <class A>
[[gnu::always_inline]] inline void keep_in_register(WidenedPairs<A>& v) {
  keep_in_register(v.hi);
  keep_in_register(v.lo);
}

// The products of bf16 activations in pairs: a column batch of x is L pairs (2 L columns, X
// prepared once per load), multiplied and added pair by pair.
template <class A>
struct Bf16PairProducts {
  using Input = uint16_t;
  using B = xsimd::batch<float, A>;
  using U = xsimd::batch<uint32_t, A>;
  using X = WidenedPairs<A>;
  static constexpr std::size_t kStep = 2 * U::size;
  static constexpr bool kWholeBatches = true;  // packed rows: zeros up to a whole chunk
  // A batch is a whole 64-byte line of a row here, twice the f32 kernel's bf16 batch, and the
  // products half the instructions (see Bf16PairRows for one vector's blocks).
  // Batches of 2 to 8 read 18-22 GB/s prefetching to L1, 17-18 to L2 (aft-gemv-bench, Zen 4).
  static constexpr PrefetchTo kPrefetchTo = PrefetchTo::kL1;
  static constexpr std::size_t kBatchesPerTurn = 1;
  static X prepare(const U& pairs) {
    return {xsimd::bitwise_cast<B>(pairs & U(0xffff0000u)), xsimd::bitwise_cast<B>(pairs << 16)};
  }
  static X load_x(const uint16_t* x, std::size_t c) {
    return prepare(U::load_unaligned(reinterpret_cast<const uint32_t*>(x + c)));
  }
  static B madd(const X& w, const X& x, const B& acc) {
    return xsimd::fma(w.lo, x.lo, xsimd::fma(w.hi, x.hi, acc));
  }
};

#if defined(__AVX512BF16__)
// vdpbf16ps, in the table of CPUs with AVX512-BF16 (isa_avx512bf16.cpp): instantiated for
// xsimd::avx512dq, an architecture no other table uses (README.md).
template <>
struct Bf16PairProducts<xsimd::avx512dq> {
  using Input = uint16_t;
  using B = xsimd::batch<float, xsimd::avx512dq>;
  using U = xsimd::batch<uint32_t, xsimd::avx512dq>;
  using X = U;
  static constexpr std::size_t kStep = 2 * U::size;
  static constexpr bool kWholeBatches = true;
  // Batches of 2 to 8 read 18-22 GB/s prefetching to L1, 17-18 to L2 (aft-gemv-bench, Zen 4).
  static constexpr PrefetchTo kPrefetchTo = PrefetchTo::kL1;
  static constexpr std::size_t kBatchesPerTurn = 1;
  static X prepare(const U& pairs) { return pairs; }
  static X load_x(const uint16_t* x, std::size_t c) {
    return U::load_unaligned(reinterpret_cast<const uint32_t*>(x + c));
  }
  static B madd(const U& w, const U& x, const B& acc) {
    return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(w.data),
                            reinterpret_cast<__m512bh>(x.data));
  }
};
#endif

// Packed bf16 weights (packed_weights.h) by activations in the same layout (F32Rows describes the
// members): a batch is Products::kStep columns of one chunk.
template <class A>
struct Bf16PairRows {
  using Value = uint16_t;
  using Products = Bf16PairProducts<A>;
  using U = xsimd::batch<uint32_t, A>;
  static_assert(kBf16ChunkCols % Products::kStep == 0, "a batch is within one chunk");
  static constexpr std::size_t kGroupRows = kBf16GroupRows;
  // Measured in the engine on a Zen 4 (vdpbf16ps, enwik8 decode): one vector streamed its
  // 512-wide layers at 18-20 GB/s in blocks of 4 rows (a group: one stream), one batch per turn
  // and no software prefetch, at 10-14 GB/s in blocks of 8 rows, two batches per turn and the
  // prefetch of the f32 kernel (the prefetches compete with the loads for the line fill buffers).
  // A batch of 16 was 1.25x faster with the prefetch than without.
  static constexpr std::size_t kRowsAlone = 4;
  static constexpr bool kPrefetchAlone = false;
  const uint16_t* w;
  std::size_t cols;
  std::size_t span() const { return bf16_packed_cols(cols); }
  const void* row(std::size_t r) const {
    return w + r / kBf16GroupRows * bf16_packed_cols(cols) * kBf16GroupRows +
           r % kBf16GroupRows * kBf16ChunkCols;
  }
  // Row r's chunks are kBf16GroupRows chunks apart.
  typename Products::X load(std::size_t r, std::size_t c) const {
    const std::size_t chunk = c - c % kBf16ChunkCols;
    const uint16_t* at =
        static_cast<const uint16_t*>(row(r)) + chunk * kBf16GroupRows + c % kBf16ChunkCols;
    return Products::prepare(U::load_unaligned(reinterpret_cast<const uint32_t*>(at)));
  }
};

// x[0, cols) rounded to bf16 (to nearest, ties to even; a NaN stays a quiet NaN, as f32_to_bf16)
// into xb[0, bf16_packed_cols(cols)), paired as a packed weight row, zeros past cols.
template <class A>
void round_bf16_pairs(std::size_t cols, const float* x, uint16_t* xb) {
  using B = xsimd::batch<float, A>;
  using U = xsimd::batch<uint32_t, A>;
  using I = xsimd::batch<int32_t, A>;
  constexpr std::size_t L = U::size;
  constexpr std::size_t kHalf = kBf16ChunkCols / 2;
  const auto round = [](const B& v) {
    const U bits = xsimd::bitwise_cast<U>(v);
    const U rounded = (bits + U(0x7fffu) + ((bits >> 16) & U(1u))) >> 16;
    const U nan = xsimd::bitwise_cast<U>(
        xsimd::select(xsimd::bitwise_cast<I>(bits & U(0x7fffffffu)) > I(0x7f800000), I(-1), I(0)));
    return rounded ^ ((rounded ^ ((bits >> 16) | U(0x40u))) & nan);
  };
  // Lanes [0, count) of x + c, zeros past it (none read there).
  const auto load = [&](std::size_t c) {
    return c < cols ? load_lanes<A>(x + c, std::min(L, cols - c), 0.0f) : B(0.0f);
  };
  for (std::size_t chunk = 0; chunk < cols; chunk += kBf16ChunkCols) {
    for (std::size_t j = 0; j < kHalf; j += L) {
      const U pairs = round(load(chunk + j)) | (round(load(chunk + kHalf + j)) << 16);
      pairs.store_unaligned(reinterpret_cast<uint32_t*>(xb + chunk + 2 * j));
    }
  }
}

}  // namespace aft::kernels::simd
