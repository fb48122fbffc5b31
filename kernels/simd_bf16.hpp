// Widening bf16 weights to float: the bits shifted up by 16, so exact. xsimd 8.1 has no
// uint16 -> uint32 widening, hence one small function per architecture, chosen as xsimd chooses
// its kernels (the most derived architecture tag that the batch's architecture converts to).
// Templates on the architecture only (see README.md).
#pragma once

#include <cstdint>
#include <cstring>

#include <xsimd/xsimd.hpp>

namespace aft::kernels::simd {
namespace bf16_detail {

template <class Arch>
using requires_arch = xsimd::kernel::requires_arch<Arch>;

#if XSIMD_WITH_SSE2
// Interleaving zero below each value is the shift.
template <class A>
xsimd::batch<float, A> load(const uint16_t* p, requires_arch<xsimd::sse2>) {
  const __m128i bits = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), bits));
}
#endif

#if XSIMD_WITH_AVX2
template <class A>
xsimd::batch<float, A> load(const uint16_t* p, requires_arch<xsimd::avx2>) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}
#endif

#if XSIMD_WITH_AVX512F
template <class A>
xsimd::batch<float, A> load(const uint16_t* p, requires_arch<xsimd::avx512f>) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}
#endif

#if XSIMD_WITH_NEON64
template <class A>
xsimd::batch<float, A> load(const uint16_t* p, requires_arch<xsimd::neon64>) {
  return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}
#endif

}  // namespace bf16_detail

// batch<float, A>::size bf16 values from p, widened.
template <class A>
xsimd::batch<float, A> load_bf16(const uint16_t* p) {
  return bf16_detail::load<A>(p, A{});
}

// One bf16 value (tails).
template <class A>
float bf16_value(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

}  // namespace aft::kernels::simd
