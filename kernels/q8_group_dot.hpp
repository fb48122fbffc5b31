// The int8 dot products of a packed q8_0 group (kernels/packed_weights.h: 16 rows, per block of 32
// columns 8 steps of 4 columns, each step the 16 rows' 4 quants side by side) with one block of
// activation quants, one specialisation per architecture: xsimd 8.1 has no int8 products.
//   kGroups                       groups per pass of a batch's GEMV (each prepared block serves
//                                 them all; one or two vectors take one group per pass)
//   kVectors                      the most vectors a batch takes at once (dot_groups; 1: one at
//                                 a time)
//   kPrefetchAlone                whether the GEMV of one vector prefetches the next pass's
//                                 weights (batches always do)
//   kPrefetchTo                   the cache level those prefetches fill
//   kAloneByGroups                whether one vector, too, takes dot_groups (V = 1) and its
//                                 blocks' extras, computed once per GEMV, rather than dot
//   X prepare(const int8_t* x)   (unless kAloneByGroups) a block of activation quants, prepared
//                                 once per pass
//   void dot(const int8_t* w, const X& x, xsimd::batch<int32_t, A>* sums)
//                                 (unless kAloneByGroups) sums[p], p < kParts: rows
//                                 [p L, p L + L) of the group (L int32 lanes), each lane the
//                                 exact dot product of its row's block
//   dot_groups<G, V> (kVectors > 1) the same sums for G groups and V (2 to kVectors; 1 too where
//                                 kAloneByGroups) blocks of activation quants at once, each
//                                 weight register loaded once for all the vectors, each step's
//                                 broadcast quants once for all the groups
//   Extra extra(const int8_t* x)  (kVectors > 1) what dot_groups needs of a block besides its
//                                 quants, computed once per GEMV for every pass
//   kWeightSums                   whether dot_groups takes a third template argument, a
//                                 WeightSums, and the weight_sums of the pass's calls
// Each step multiplies a register of weights by the step's 4 activation quants broadcast to
// every lane: no horizontal sums. Quants are in [-127, 127], so no step saturates.
// Specialisations of a template on the architecture only (see README.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <xsimd/xsimd.hpp>

#include "kernels/simd_prefetch.hpp"
#include "kernels/simd_register.hpp"

namespace aft::kernels::simd {

template <class A>
struct Q8GroupDot;

// How dot_groups of a table with kWeightSums (the avx512vnni table's) gets a term of each row's
// block that depends on its weights alone: computed beside the products (kTake), the same and
// stored for the pass's later calls (kTakeAndKeep), or read from there (kGiven).
enum class WeightSums { kTake, kTakeAndKeep, kGiven };

// The 4 activation quants of step s as one 32-bit value (a template on the architecture, like
// every function of the ISA files).
template <class A>
int32_t q8_step_quants(const int8_t* x, std::size_t s) {
  int32_t v;
  std::memcpy(&v, x + 4 * s, sizeof v);
  return v;
}

#if XSIMD_WITH_SSE2
// SSE2: 4 rows per register. Quants sign-extended to int16 (unpack with themselves, shift right),
// pmaddwd by the step's quants as int16: lane pairs of each row's sums, added per row at the end.
template <>
struct Q8GroupDot<xsimd::sse2> {
  using A = xsimd::sse2;
  static constexpr std::size_t kParts = 4;
  static constexpr std::size_t kGroups = 1;
  static constexpr std::size_t kVectors = 1;
  static constexpr bool kPrefetchAlone = true;
  static constexpr PrefetchTo kPrefetchTo = PrefetchTo::kL1;
  static constexpr bool kAloneByGroups = false;
  static constexpr bool kWeightSums = false;
  struct X {
    __m128i step[8];  // x[4s..4s+3] as int16, twice
  };
  static X prepare(const int8_t* x) {
    X p;
    for (std::size_t s = 0; s < 8; ++s) {
      const __m128i v = _mm_cvtsi32_si128(q8_step_quants<A>(x, s));
      const __m128i wide = _mm_srai_epi16(_mm_unpacklo_epi8(v, v), 8);
      p.step[s] = _mm_unpacklo_epi64(wide, wide);
    }
    return p;
  }
  static void dot(const int8_t* w, const X& x, xsimd::batch<int32_t, xsimd::sse2>* sums) {
    for (std::size_t p = 0; p < kParts; ++p) {
      __m128i low = _mm_setzero_si128(), high = _mm_setzero_si128();  // rows 0-1, 2-3
      for (std::size_t s = 0; s < 8; ++s) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + s * 64 + p * 16));
        low = _mm_add_epi32(low,
                            _mm_madd_epi16(_mm_srai_epi16(_mm_unpacklo_epi8(v, v), 8), x.step[s]));
        high = _mm_add_epi32(high,
                             _mm_madd_epi16(_mm_srai_epi16(_mm_unpackhi_epi8(v, v), 8), x.step[s]));
      }
      const __m128 l = _mm_castsi128_ps(low), h = _mm_castsi128_ps(high);
      sums[p] = _mm_add_epi32(_mm_castps_si128(_mm_shuffle_ps(l, h, _MM_SHUFFLE(2, 0, 2, 0))),
                              _mm_castps_si128(_mm_shuffle_ps(l, h, _MM_SHUFFLE(3, 1, 3, 1))));
    }
  }
};
#endif

#if XSIMD_WITH_FMA3_AVX2
// The sign trick (AVX2, and AVX-512BW without VNNI): pmaddubsw of |x| by the weights with x's sign,
// then pmaddwd with ones. What differs between the two is in Q8SignTrickRegisters<A>: the register,
// and how the weights take x's sign (vpsignb on AVX2; a masked negation on AVX-512, which has no
// vpsignb).
template <class A>
struct Q8SignTrickRegisters;

// AVX2: 8 rows per register.
template <>
struct Q8SignTrickRegisters<xsimd::fma3<xsimd::avx2>> {
  using Reg = __m256i;
  using Sign = __m256i;  // the quants themselves: vpsignb takes their sign
  static constexpr std::size_t kParts = 2;
  static Reg load(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const Reg*>(p)); }
  static Reg broadcast(int32_t v) { return _mm256_set1_epi32(v); }
  static Reg zero() { return _mm256_setzero_si256(); }
  static Reg ones() { return _mm256_set1_epi16(1); }
  static Reg magnitude(Reg x) { return _mm256_abs_epi8(x); }
  static Sign sign(Reg x) { return x; }
  static Reg signed_by(Reg w, Sign x) { return _mm256_sign_epi8(w, x); }
  static Reg add(Reg a, Reg b) { return _mm256_add_epi32(a, b); }
  // acc + the sums of 4 products of |x| by the signed weights in each int32 lane.
  static Reg add_products(Reg acc, Reg magnitude, Reg signed_w, Reg ones) {
    return _mm256_add_epi32(acc,
                            _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, signed_w), ones));
  }
};

#if XSIMD_WITH_AVX512BW
// AVX-512BW (the avx512 table, xsimd::avx512f): the 16 rows in one register.
template <>
struct Q8SignTrickRegisters<xsimd::avx512f> {
  using Reg = __m512i;
  using Sign = __mmask64;  // the lanes whose quant is negative
  static constexpr std::size_t kParts = 1;
  static Reg load(const int8_t* p) { return _mm512_loadu_si512(p); }
  static Reg broadcast(int32_t v) { return _mm512_set1_epi32(v); }
  static Reg zero() { return _mm512_setzero_si512(); }
  static Reg ones() { return _mm512_set1_epi16(1); }
  static Reg magnitude(Reg x) { return _mm512_abs_epi8(x); }
  static Sign sign(Reg x) { return _mm512_movepi8_mask(x); }
  static Reg signed_by(Reg w, Sign negative) {
    return _mm512_mask_sub_epi8(w, negative, _mm512_setzero_si512(), w);
  }
  static Reg add(Reg a, Reg b) { return _mm512_add_epi32(a, b); }
  static Reg add_products(Reg acc, Reg magnitude, Reg signed_w, Reg ones) {
    return _mm512_add_epi32(acc,
                            _mm512_madd_epi16(_mm512_maddubs_epi16(magnitude, signed_w), ones));
  }
};
#endif

// Q8GroupDot by the sign trick, written once for both (constants apart).
template <class A>
struct Q8SignTrick {
  using R = Q8SignTrickRegisters<A>;
  using Reg = typename R::Reg;
  static constexpr std::size_t kParts = R::kParts;
  static constexpr std::size_t kPartBytes = 64 / kParts;  // a step's bytes of one register
  struct X {
    Reg magnitude[8];
    typename R::Sign sign[8];
  };
  static X prepare(const int8_t* x) {
    X p;
    for (std::size_t s = 0; s < 8; ++s) {
      const Reg v = R::broadcast(q8_step_quants<A>(x, s));
      p.magnitude[s] = R::magnitude(v);
      p.sign[s] = R::sign(v);
    }
    return p;
  }
  // At least two chains of dependent steps a block: the parts' own, or two accumulators of one.
  static void dot(const int8_t* w, const X& x, xsimd::batch<int32_t, A>* sums) {
    constexpr std::size_t kChains = kParts == 1 ? 2 : 1;
    const Reg ones = R::ones();
    for (std::size_t p = 0; p < kParts; ++p) {
      Reg acc[kChains];
      for (std::size_t c = 0; c < kChains; ++c) acc[c] = R::zero();
      for (std::size_t s = 0; s < 8; ++s) {
        const Reg v = R::load(w + s * 64 + p * kPartBytes);
        acc[s % kChains] =
            R::add_products(acc[s % kChains], x.magnitude[s], R::signed_by(v, x.sign[s]), ones);
      }
      for (std::size_t c = 1; c < kChains; ++c) acc[0] = R::add(acc[0], acc[c]);
      sums[p] = acc[0];
    }
  }
  // The magnitudes of a block's quants: a batch broadcasts them from memory rather than take each
  // step's again (measured on a Zen 3, 16 vectors in cache: 120 GOP/s against 115).
  struct Extra {
    int8_t magnitude[32];
  };
  static Extra extra(const int8_t* x) {
    Extra e;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(e.magnitude),
                        _mm256_abs_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x))));
    return e;
  }
  // dot for G groups and V vectors: each step's weight registers (G kParts) loaded once for the V
  // vectors, each vector's broadcast quants, sign and magnitudes once for the G groups. On AVX2 the
  // accumulators (G kParts V), the weights, a vector's two broadcasts and the ones fit the 16
  // registers for G kParts (V + 1) <= 12; AVX-512 has 32.
  template <std::size_t G, std::size_t V>
  static void dot_groups(const int8_t* w, std::size_t group_stride, const int8_t* const* x,
                         const Extra* const* extras, xsimd::batch<int32_t, A> (*sums)[V]) {
    constexpr std::size_t N = G * kParts;
    const Reg ones = R::ones();
    Reg acc[N][V];
#pragma GCC unroll 16
    for (std::size_t i = 0; i < N; ++i) {
#pragma GCC unroll 16
      for (std::size_t v = 0; v < V; ++v) acc[i][v] = R::zero();
    }
    // The steps stay a loop: unrolled, GCC interleaved them and spilled accumulators (AVX2 on a
    // Zen 3: 115 GOP/s against 121).
#pragma GCC unroll 1
    for (std::size_t s = 0; s < 8; ++s) {
      Reg wv[N];
#pragma GCC unroll 16
      for (std::size_t i = 0; i < N; ++i) {
        wv[i] = R::load(w + i / kParts * group_stride + s * 64 + i % kParts * kPartBytes);
      }
#pragma GCC unroll 16
      for (std::size_t v = 0; v < V; ++v) {
        const typename R::Sign sign = R::sign(R::broadcast(q8_step_quants<A>(x[v], s)));
        const Reg magnitude = R::broadcast(q8_step_quants<A>(extras[v]->magnitude, s));
#pragma GCC unroll 16
        for (std::size_t i = 0; i < N; ++i) {
          acc[i][v] = R::add_products(acc[i][v], magnitude, R::signed_by(wv[i], sign), ones);
        }
      }
    }
#pragma GCC unroll 16
    for (std::size_t i = 0; i < N; ++i) {
#pragma GCC unroll 16
      for (std::size_t v = 0; v < V; ++v) sums[i][v] = acc[i][v];
    }
  }
};

template <>
struct Q8GroupDot<xsimd::fma3<xsimd::avx2>> : Q8SignTrick<xsimd::fma3<xsimd::avx2>> {
  // Measured on a Zen 3 (aft-gemv-bench 512 2048, 16 vectors in cache, one thread): 1 group x 4
  // vectors 116-121 GOP/s, 2 x 2 115-118, 1 x 3 114-117, 1 x 5 116, against 98 for vectors one
  // at a time by 2 groups. There a register of 32 products (vpsignb, vpmaddubsw, vpmaddwd,
  // vpaddd) takes about 1.4 cycles in a loop of nothing else, 1.0 without the vpsignb: about
  // 145 GOP/s at most.
  static constexpr std::size_t kGroups = 1;
  static constexpr std::size_t kVectors = 4;
  static constexpr bool kPrefetchAlone = true;
  static constexpr PrefetchTo kPrefetchTo = PrefetchTo::kL1;
  // One vector through dot_groups: on a Zen 5 (aft-gemv-bench 1024 1024 avx2) level in cache and
  // from memory at best, up to 0.8x in cache.
  static constexpr bool kAloneByGroups = false;
  static constexpr bool kWeightSums = false;
};
#endif

#if XSIMD_WITH_AVX512BW
// AVX-512: the 16 rows in one register. The avx512 table (xsimd::avx512f) takes the sign trick
// above; the avx512vnni table (xsimd::avx512bw, an architecture no other table uses, compiled
// with -mavx512vnni) takes the weights as unsigned w + 128 (an xor) into vpdpbusd by x and
// subtracts 128 sum(x) once.
template <>
struct Q8GroupDot<xsimd::avx512f> : Q8SignTrick<xsimd::avx512f> {
  // Two groups a pass, 4 vectors at once: the shape measured best for VNNI on a Zen 5 (below);
  // not timed on an AVX-512 core without VNNI (none has been at hand).
  static constexpr std::size_t kGroups = 2;
  static constexpr std::size_t kVectors = 4;
  static constexpr bool kPrefetchAlone = true;
  static constexpr PrefetchTo kPrefetchTo = PrefetchTo::kL1;
  // One vector through dot_groups (one chain of steps a block): on a Zen 5 0.45-0.75x in cache.
  static constexpr bool kAloneByGroups = false;
  static constexpr bool kWeightSums = false;
};

#if defined(__AVX512VNNI__)
template <>
struct Q8GroupDot<xsimd::avx512bw> {
  using A = xsimd::avx512bw;
  static constexpr std::size_t kParts = 1;
  // Measured on a Zen 5 (aft-gemv-bench 512 2048, 16 vectors in cache): 2 groups x 4 vectors
  // 560 GOP/s, 1 x 8 510, 4 x 2 430, 3 x 4 580 (but 512-row matrices leave a group to passes of
  // one); 4 groups, each a call for 4 vectors that loaded every step's quants again, 370-390.
  static constexpr std::size_t kGroups = 2;
  static constexpr std::size_t kVectors = 4;
  // Measured on a Zen 4: one sequence of the 430M shape decoded 35 tokens/s with the prefetch, 45
  // without, in passes of 4 groups; enwik8 324-366 against 439-478 in passes of one group (too
  // many lines in flight either way). The AVX2 and AVX-512BW tables gain up to 5% from it there.
  // On Intel's cores the table takes it (isa_avx512vnni.cpp).
  static constexpr bool kPrefetchAlone = false;
  // Measured on a Zen 5 (aft-gemv-bench 512 2048, weights from memory): 4 to 16 vectors read
  // 1.3-1.5x faster with the next pass prefetched to L2 than to L1, in cache 2-3% faster.
  static constexpr PrefetchTo kPrefetchTo = PrefetchTo::kL2;
  // A block's unsigned quants (below) are made once per GEMV for every pass, and one vector, too,
  // takes them through dot_groups.
  static constexpr bool kAloneByGroups = true;
  // vpdpbusd multiplies unsigned bytes by signed ones: the activations take the + 128 (x ^ 0x80),
  // once per GEMV, and the weights stay as stored. What the + 128 adds to a row's block,
  // 128 sum(w), is the weights' own (WeightSums): a pass's first call takes it beside its products
  // and keeps its negation, from which every later call's accumulators start. On an Intel core,
  // whose 512-bit integer ops share two ports with vpdpbusd, the weights made unsigned by an xor
  // in every call and an offset of x added to every sum had taken 24 ops a block of 2 groups by 4
  // vectors beside its 64 products (docs/benchmarks.md: 1.1-1.2x in cache, 16 vectors).
  struct Extra {
    uint8_t biased[32];  // x + 128
  };
  static Extra extra(const int8_t* x) {
    Extra e;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(e.biased),
                        _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)),
                                         _mm256_set1_epi8(static_cast<char>(0x80))));
    return e;
  }
  static constexpr bool kWeightSums = true;
  // The sums of G groups (group g's block at w + g * group_stride) and V vectors (extras[v]:
  // vector v's block of unsigned quants) at once, step after step: each step's weight register,
  // loaded once, serves the V vectors, and each broadcast step of a vector's quants the G groups.
  // Group g's -128 sum(w) of the block is kept at, or given from, weight_sums + 16 g. The
  // accumulators (G V), the broadcasts (V) and the caller's float sums (G V) fit the 32 registers
  // for G V <= 8. x is not read: the unsigned quants hold it.
  template <std::size_t G, std::size_t V, WeightSums kSums>
  static void dot_groups(const int8_t* w, std::size_t group_stride, const int8_t* const* /*x*/,
                         const Extra* const* extras, int32_t* weight_sums,
                         xsimd::batch<int32_t, A> (*sums)[V]) {
    static_assert(V >= 1 && V <= kVectors, "1 to kVectors vectors");
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
    __m512i acc[G][V];
    constexpr bool kGiven = kSums == WeightSums::kGiven;
    __m512i taken[G];  // 128 sum(w) of each group, where not given
#pragma GCC unroll 16
    for (std::size_t g = 0; g < G; ++g) {
      taken[g] = _mm512_setzero_si512();
#pragma GCC unroll 16
      for (std::size_t v = 0; v < V; ++v) {
        acc[g][v] = kGiven ? _mm512_loadu_si512(weight_sums + 16 * g) : _mm512_setzero_si512();
      }
    }
#pragma GCC unroll 16
    for (std::size_t s = 0; s < 8; ++s) {
      __m512i step[V];
#pragma GCC unroll 16
      for (std::size_t v = 0; v < V; ++v) {
        step[v] = _mm512_set1_epi32(
            q8_step_quants<A>(reinterpret_cast<const int8_t*>(extras[v]->biased), s));
      }
#pragma GCC unroll 16
      for (std::size_t g = 0; g < G; ++g) {
        // Pinned: GCC would fold the load into every vpdpbusd, a load per product.
        xsimd::batch<int8_t, A> pinned(_mm512_loadu_si512(w + g * group_stride + s * 64));
        keep_in_register(pinned);
        const __m512i wv = pinned;
        if (!kGiven) taken[g] = _mm512_dpbusd_epi32(taken[g], bias, wv);
#pragma GCC unroll 16
        for (std::size_t v = 0; v < V; ++v) acc[g][v] = _mm512_dpbusd_epi32(acc[g][v], step[v], wv);
      }
    }
#pragma GCC unroll 16
    for (std::size_t g = 0; g < G; ++g) {
      if constexpr (kSums == WeightSums::kTakeAndKeep) {
        _mm512_storeu_si512(weight_sums + 16 * g,
                            _mm512_sub_epi32(_mm512_setzero_si512(), taken[g]));
      }
#pragma GCC unroll 16
      for (std::size_t v = 0; v < V; ++v) {
        sums[g][v] = kGiven ? acc[g][v] : _mm512_sub_epi32(acc[g][v], taken[g]);
      }
    }
  }
};
#endif
#endif

#if XSIMD_WITH_NEON64
// What both NEON tables take of a block of activation quants: each step's 4 quants in every
// 32-bit lane, a register of 4 rows' 4 quants multiplied lane by lane.
template <class A>
struct Q8NeonSteps {
  struct X {
    int8x16_t step[8];  // x[4s..4s+3], four times
  };
  static X prepare(const int8_t* x) {
    X p;
    for (std::size_t s = 0; s < 8; ++s) p.step[s] = broadcast_step(x, s);
    return p;
  }
  static int8x16_t broadcast_step(const int8_t* x, std::size_t s) {
    return vreinterpretq_s8_s32(vdupq_n_s32(q8_step_quants<A>(x, s)));
  }
};

// NEON (aarch64 baseline): 4 rows per register. vmull_s8 / vmlal_s8 of two steps into int16
// (two products of at most 127^2 fit), vpadalq_s16 into lane pairs of each row's sums, added per
// row at the end (vpaddq_s32). sdot (armv8.2's dotprod): the neondot table below.
template <>
struct Q8GroupDot<xsimd::neon64> : Q8NeonSteps<xsimd::neon64> {
  using A = xsimd::neon64;
  static constexpr std::size_t kParts = 4;
  static constexpr std::size_t kGroups = 1;
  static constexpr std::size_t kVectors = 1;
  static constexpr bool kPrefetchAlone = true;
  static constexpr PrefetchTo kPrefetchTo = PrefetchTo::kL1;
  static constexpr bool kAloneByGroups = false;
  static constexpr bool kWeightSums = false;
  static void dot(const int8_t* w, const X& x, xsimd::batch<int32_t, xsimd::neon64>* sums) {
    for (std::size_t p = 0; p < kParts; ++p) {
      int32x4_t low = vdupq_n_s32(0), high = vdupq_n_s32(0);  // rows 0-1, 2-3
      for (std::size_t s = 0; s < 8; s += 2) {
        const int8x16_t a = vld1q_s8(w + s * 64 + p * 16);
        const int8x16_t b = vld1q_s8(w + (s + 1) * 64 + p * 16);
        low = vpadalq_s16(low, vmlal_s8(vmull_s8(vget_low_s8(a), vget_low_s8(x.step[s])),
                                        vget_low_s8(b), vget_low_s8(x.step[s + 1])));
        high = vpadalq_s16(high, vmlal_high_s8(vmull_high_s8(a, x.step[s]), b, x.step[s + 1]));
      }
      sums[p] = vpaddq_s32(low, high);
    }
  }
};
#endif

#if XSIMD_WITH_NEON64 && defined(__ARM_FEATURE_DOTPROD)
// NEON with the dot product extension (armv8.2's dotprod, on nearly every 64-bit Arm server and
// laptop core): the neondot table (isa_neondot.cpp), for xsimd::neon, an architecture no other
// table uses on aarch64, so that its dotprod code cannot be merged into the neon table's. Each
// lane of sdot is one row's 4 quants of a step by the step's 4 activation quants, so a register
// holds 4 rows' exact sums with no widening and no pairwise adds: one instruction for 16
// products, against three (vmull, vmlal, vpadal for two steps) on the baseline.
template <>
struct Q8GroupDot<xsimd::neon> : Q8NeonSteps<xsimd::neon> {
  using A = xsimd::neon;
  static constexpr std::size_t kParts = 4;
  // AVX2's shape, 1 group by 4 vectors (not timed: no Arm machine at hand): the accumulators
  // (kParts kVectors), a step's weights (kParts) and a broadcast take 21 of the 32 registers.
  static constexpr std::size_t kGroups = 1;
  static constexpr std::size_t kVectors = 4;
  static constexpr bool kPrefetchAlone = true;
  static constexpr PrefetchTo kPrefetchTo = PrefetchTo::kL1;
  // A block's preparation is its 8 broadcast steps, the work dot_groups does per group as well.
  static constexpr bool kAloneByGroups = false;
  static constexpr bool kWeightSums = false;
  // sdot needs nothing of a block besides its quants.
  struct Extra {};
  static Extra extra(const int8_t*) { return {}; }
  template <std::size_t G, std::size_t V>
  static void dot_groups(const int8_t* w, std::size_t group_stride, const int8_t* const* x,
                         const Extra* const*, xsimd::batch<int32_t, A> (*sums)[V]) {
    static_assert(V >= 2 && V <= kVectors, "2 to kVectors vectors");
    constexpr std::size_t R = G * kParts;
    int32x4_t acc[R][V];
    for (std::size_t i = 0; i < R; ++i) {
      for (std::size_t v = 0; v < V; ++v) acc[i][v] = vdupq_n_s32(0);
    }
    for (std::size_t s = 0; s < 8; ++s) {
      int8x16_t wv[R];
      for (std::size_t i = 0; i < R; ++i) {
        wv[i] = vld1q_s8(w + i / kParts * group_stride + s * 64 + i % kParts * 16);
      }
      for (std::size_t v = 0; v < V; ++v) {
        const int8x16_t step = broadcast_step(x[v], s);
        for (std::size_t i = 0; i < R; ++i) acc[i][v] = vdotq_s32(acc[i][v], wv[i], step);
      }
    }
    for (std::size_t i = 0; i < R; ++i) {
      for (std::size_t v = 0; v < V; ++v) sums[i][v] = acc[i][v];
    }
  }
  // Two accumulators a part halve the chain of dependent steps.
  static void dot(const int8_t* w, const X& x, xsimd::batch<int32_t, A>* sums) {
    for (std::size_t p = 0; p < kParts; ++p) {
      int32x4_t acc[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
      for (std::size_t s = 0; s < 8; ++s) {
        acc[s % 2] = vdotq_s32(acc[s % 2], vld1q_s8(w + s * 64 + p * 16), x.step[s]);
      }
      sums[p] = vaddq_s32(acc[0], acc[1]);
    }
  }
};
#endif

}  // namespace aft::kernels::simd
