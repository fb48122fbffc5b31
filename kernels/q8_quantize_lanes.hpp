// The two lane operations of q8_0 quantization that xsimd 8.1 lacks: the largest lane of a float
// batch, and int32 lanes stored as int8. Without them a block went through memory twice (a store
// of the lanes read back one by one; a store of the int32 quants narrowed by the compiler), and
// quantizing ran at 0.38 ns a value on a Zen 4 (AVX-512) against 0.19 with them: a batch's
// activations are quantized before every q8_0 product. One specialisation per architecture of a
// quantizing table (templates on the architecture only, see README.md).
//   float max_lane(B v)                  the largest lane (exact: any order gives the same value
//                                         when no lane is NaN)
//   void store_int8(I v, int8_t* out)    lanes in [-127, 127], stored as I::size int8
#pragma once

#include <cstdint>
#include <cstring>

#include <xsimd/xsimd.hpp>

namespace aft::kernels::simd {

template <class A>
struct Q8QuantizeLanes;

#if XSIMD_WITH_SSE2
template <>
struct Q8QuantizeLanes<xsimd::sse2> {
  static float max_lane(const xsimd::batch<float, xsimd::sse2>& v) {
    const __m128 pairs = _mm_max_ps(v, _mm_movehl_ps(v, v));
    return _mm_cvtss_f32(_mm_max_ss(pairs, _mm_shuffle_ps(pairs, pairs, 1)));
  }
  static void store_int8(const xsimd::batch<int32_t, xsimd::sse2>& v, int8_t* out) {
    const __m128i words = _mm_packs_epi32(v, v);
    const int32_t bytes = _mm_cvtsi128_si32(_mm_packs_epi16(words, words));
    std::memcpy(out, &bytes, sizeof bytes);
  }
};
#endif

#if XSIMD_WITH_FMA3_AVX2
template <>
struct Q8QuantizeLanes<xsimd::fma3<xsimd::avx2>> {
  using A = xsimd::fma3<xsimd::avx2>;
  static float max_lane(const xsimd::batch<float, A>& v) {
    const __m128 halves = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 pairs = _mm_max_ps(halves, _mm_movehl_ps(halves, halves));
    return _mm_cvtss_f32(_mm_max_ss(pairs, _mm_shuffle_ps(pairs, pairs, 1)));
  }
  static void store_int8(const xsimd::batch<int32_t, A>& v, int8_t* out) {
    const __m128i words =
        _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packs_epi16(words, words));
  }
};
#endif

#if XSIMD_WITH_AVX512F
template <>
struct Q8QuantizeLanes<xsimd::avx512f> {
  static float max_lane(const xsimd::batch<float, xsimd::avx512f>& v) {
    return _mm512_reduce_max_ps(v);
  }
  static void store_int8(const xsimd::batch<int32_t, xsimd::avx512f>& v, int8_t* out) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtepi32_epi8(v));
  }
};
#endif

#if XSIMD_WITH_NEON64
template <>
struct Q8QuantizeLanes<xsimd::neon64> {
  static float max_lane(const xsimd::batch<float, xsimd::neon64>& v) { return vmaxvq_f32(v); }
  static void store_int8(const xsimd::batch<int32_t, xsimd::neon64>& v, int8_t* out) {
    const int16x4_t words = vmovn_s32(v);
    const int8x8_t bytes = vmovn_s16(vcombine_s16(words, words));
    const int32_t four = vget_lane_s32(vreinterpret_s32_s8(bytes), 0);
    std::memcpy(out, &four, sizeof four);
  }
};
#endif

}  // namespace aft::kernels::simd
