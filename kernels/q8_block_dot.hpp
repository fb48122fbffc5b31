// The int8 dot products of q8_0 blocks (32 quants), one specialisation per architecture: xsimd
// 8.1 has no int8 products. Q8BlockDot<A> gives, for kBlocks consecutive blocks of a weight row and
// of the activations, a batch<int32_t, A> whose lanes hold partial sums: lane group k (size /
// kBlocks lanes) adds up to the exact dot product of block k. Quants are in [-127, 127], so no step
// saturates: a pair of products is at most 2 x 127^2 < 2^15.
//   X load_x(const int8_t* x)                 the activation quants of a step, prepared once for
//                                              every row
//   batch<int32_t, A> dot(const int8_t* w, const X& x)
//   batch<float, A> scales(const float* s)    lane group k gets s[k]
// With kBlocks > 1, load_x_one / dot_one do a single block (the row's last when the count is
// odd), reading only its 32 bytes; its sums are in lane group 0, the other lanes are 0.
// Specialisations of a template on the architecture only (see README.md).
#pragma once

#include <cstddef>
#include <cstdint>

#include <xsimd/xsimd.hpp>

namespace aft::kernels::simd {

template <class A>
struct Q8BlockDot;

#if XSIMD_WITH_SSE2
// SSE2: sign-extend to int16 (unpack with itself, shift right), then pmaddwd.
template <>
struct Q8BlockDot<xsimd::sse2> {
  static constexpr std::size_t kBlocks = 1;
  struct X {
    __m128i part[4];
  };
  static __m128i low(__m128i v) { return _mm_srai_epi16(_mm_unpacklo_epi8(v, v), 8); }
  static __m128i high(__m128i v) { return _mm_srai_epi16(_mm_unpackhi_epi8(v, v), 8); }
  static X load_x(const int8_t* x) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 16));
    return X{{low(a), high(a), low(b), high(b)}};
  }
  static xsimd::batch<int32_t, xsimd::sse2> dot(const int8_t* w, const X& x) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 16));
    const __m128i s0 =
        _mm_add_epi32(_mm_madd_epi16(low(a), x.part[0]), _mm_madd_epi16(high(a), x.part[1]));
    const __m128i s1 =
        _mm_add_epi32(_mm_madd_epi16(low(b), x.part[2]), _mm_madd_epi16(high(b), x.part[3]));
    return _mm_add_epi32(s0, s1);
  }
  static xsimd::batch<float, xsimd::sse2> scales(const float* s) { return _mm_set1_ps(s[0]); }
};
#endif

#if XSIMD_WITH_FMA3_AVX2
// AVX2: |x| as unsigned bytes times the weights with x's sign (vpsignb), pmaddubsw, then pmaddwd
// with ones.
template <>
struct Q8BlockDot<xsimd::fma3<xsimd::avx2>> {
  using A = xsimd::fma3<xsimd::avx2>;
  static constexpr std::size_t kBlocks = 1;
  struct X {
    __m256i magnitude, sign;
  };
  static X load_x(const int8_t* x) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
    return X{_mm256_abs_epi8(v), v};
  }
  static xsimd::batch<int32_t, A> dot(const int8_t* w, const X& x) {
    const __m256i signed_w =
        _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)), x.sign);
    const __m256i pairs = _mm256_maddubs_epi16(x.magnitude, signed_w);
    return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
  }
  static xsimd::batch<float, A> scales(const float* s) { return _mm256_set1_ps(s[0]); }
};
#endif

#if XSIMD_WITH_AVX512BW
// AVX-512: two blocks per 512-bit step; the weights take x's sign by a masked negation (no
// vpsignb on 512 bits). The avx512 table (xsimd::avx512f) multiplies with pmaddubsw + pmaddwd;
// the avx512vnni table (xsimd::avx512bw, an architecture no other table uses, compiled with
// -mavx512vnni) with vpdpbusd.
template <class A, bool kVnni>
struct Q8BlockDotAvx512 {
  static constexpr std::size_t kBlocks = 2;
  struct X {
    __m512i magnitude;
    __mmask64 negative;
  };
  static X prepare(__m512i v) { return X{_mm512_abs_epi8(v), _mm512_movepi8_mask(v)}; }
  static X load_x(const int8_t* x) { return prepare(_mm512_loadu_si512(x)); }
  static X load_x_one(const int8_t* x) { return prepare(widen(x)); }
  static xsimd::batch<int32_t, A> multiply(__m512i w, const X& x) {
    const __m512i signed_w = _mm512_mask_sub_epi8(w, x.negative, _mm512_setzero_si512(), w);
    if constexpr (kVnni) {
      return _mm512_dpbusd_epi32(_mm512_setzero_si512(), x.magnitude, signed_w);
    } else {
      return _mm512_madd_epi16(_mm512_maddubs_epi16(x.magnitude, signed_w), _mm512_set1_epi16(1));
    }
  }
  static xsimd::batch<int32_t, A> dot(const int8_t* w, const X& x) {
    return multiply(_mm512_loadu_si512(w), x);
  }
  static xsimd::batch<int32_t, A> dot_one(const int8_t* w, const X& x) {
    return multiply(widen(w), x);
  }
  static xsimd::batch<float, A> scales(const float* s) {
    return _mm512_insertf32x8(_mm512_set1_ps(s[0]), _mm256_set1_ps(s[1]), 1);
  }
  // One block's 32 bytes in the low half, zeros above.
  static __m512i widen(const int8_t* p) {
    return _mm512_inserti64x4(_mm512_setzero_si512(),
                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), 0);
  }
};

template <>
struct Q8BlockDot<xsimd::avx512f> : Q8BlockDotAvx512<xsimd::avx512f, false> {};
#if defined(__AVX512VNNI__)
template <>
struct Q8BlockDot<xsimd::avx512bw> : Q8BlockDotAvx512<xsimd::avx512bw, true> {};
#endif
#endif

#if XSIMD_WITH_NEON64
// NEON (aarch64 baseline): vmull_s8 / vmlal_s8 into int16 pairs, vpadalq_s16 into int32.
// (sdot needs the armv8.2 dotprod extension, which the baseline lacks.)
template <>
struct Q8BlockDot<xsimd::neon64> {
  static constexpr std::size_t kBlocks = 1;
  struct X {
    int8x16_t low, high;
  };
  static X load_x(const int8_t* x) { return X{vld1q_s8(x), vld1q_s8(x + 16)}; }
  static int16x8_t pairs(int8x16_t w, int8x16_t x) {
    return vmlal_high_s8(vmull_s8(vget_low_s8(w), vget_low_s8(x)), w, x);
  }
  static xsimd::batch<int32_t, xsimd::neon64> dot(const int8_t* w, const X& x) {
    const int32x4_t low = vpaddlq_s16(pairs(vld1q_s8(w), x.low));
    return vpadalq_s16(low, pairs(vld1q_s8(w + 16), x.high));
  }
  static xsimd::batch<float, xsimd::neon64> scales(const float* s) { return vdupq_n_f32(s[0]); }
};
#endif

}  // namespace aft::kernels::simd
