// CRC-32 by carry-less multiplication (PCLMULQDQ, and VPCLMULQDQ on 512-bit registers): the data is
// folded 128 bits at a time into a few accumulators, then reduced to 32 bits with Barrett's method.
// Each function carries its own target attribute, so the library still builds for baseline x86-64
// and crc32.cpp calls these only when cpuid says the CPU has the instructions.
//
// Derivation. Without the complements, the CRC of a message M(x) is M(x) x^32 mod P(x). The CRC is
// bit-reflected: in a little-endian register of n bits, bit i holds the coefficient of x^(n-1-i),
// so the first byte's low bit is the highest power. A 128-bit block A followed by D more bits of
// message contributes A(x) x^D. Folding A onto the block S bits later (D - S bits before the end)
// replaces it by G = A x^S mod P, which has the same remainder. Splitting A = H x^64 + L,
//   G = H (x^(S+64) mod P) + L (x^S mod P),
// two 64 x 32-bit products of degree < 96, so G fits a block and is XORed into it.
// A carry-less product of two reflected values whose bit 0 stands for x^a and x^b has bit 0 for
// x^(a+b): a 64-bit H (x^63) times a 64-bit constant (x^63) gives bit 0 = x^126, one below the
// 128-bit block's x^127, so the product read as a block is H K x. The constants are therefore
// x^(S+63) and x^(S-1) mod P, a 32-bit remainder placed in a 64-bit lane's upper half (bit 32 =
// x^31). make_fold() computes them at compile time by shifting x^0 through the CRC register.
//
// The last block R (R x^32 mod P is the CRC): with R = H x^64 + L, R x^32 = H x^96 + L x^32
// == H (x^96 mod P) + L x^32 =: U (degree < 96); with U = U1 x^64 + U0 (U1 below x^32),
// U == U1 (x^64 mod P) + U0 =: V (degree < 64). Barrett: for deg V < 64 and mu = x^64 div P,
// the quotient V div P is exactly ((V div x^32) mu) div x^32, and V mod P = V + (V div P) P.
#include <immintrin.h>

#include "crc32_paths.h"

namespace aft::crc32_paths {
namespace {

constexpr uint32_t kPoly = 0xEDB88320u;           // P without x^32, reflected
constexpr uint64_t kPolyNormal = 0x104C11DB7ull;  // P with x^32, bit d = x^d

// x^k mod P in the CRC register (bit i = x^(31-i)): x^0 multiplied by x k times.
constexpr uint32_t x_pow_mod(uint32_t k) {
  uint32_t c = 0x80000000u;
  for (; k > 0; --k) c = (c & 1u) ? (c >> 1) ^ kPoly : c >> 1;
  return c;
}

// Reverses the low `bits` bits.
constexpr uint64_t reflect(uint64_t v, int bits) {
  uint64_t r = 0;
  for (int i = 0; i < bits; ++i) r |= ((v >> i) & 1u) << (bits - 1 - i);
  return r;
}

// mu = x^64 div P by long division (bit d = x^d): 33 bits, x^32 set.
constexpr uint64_t barrett_mu() {
  uint64_t rem = 0, q = 0;
  for (int d = 64; d >= 0; --d) {
    rem = (rem << 1) | (d == 64 ? 1u : 0u);
    q <<= 1;
    if ((rem >> 32) & 1u) {
      rem ^= kPolyNormal;
      q |= 1u;
    }
  }
  return q;
}

static_assert(reflect(kPolyNormal, 33) == (uint64_t{kPoly} << 1 | 1u), "P and its reflection");
static_assert(x_pow_mod(32) == kPoly, "x^32 mod P is P without its leading term");

// The reflected 33-bit mu and P: bit 0 = x^32.
constexpr uint64_t kMu = reflect(barrett_mu(), 33);
constexpr uint64_t kP33 = reflect(kPolyNormal, 33);

struct Fold {
  uint64_t for_high;  // multiplies the lane's low qword: H, the block's higher powers
  uint64_t for_low;   // multiplies its high qword: L
};

// The constants folding a block onto the one `bits` later.
constexpr Fold make_fold(uint32_t bits) {
  return {uint64_t{x_pow_mod(bits + 63)} << 32, uint64_t{x_pow_mod(bits - 1)} << 32};
}

constexpr Fold kFold128 = make_fold(128);
constexpr Fold kFold512 = make_fold(512);
constexpr Fold kFold2048 = make_fold(2048);
constexpr uint64_t kX95 = uint64_t{x_pow_mod(95)} << 32;  // H (x^96 mod P), one x in the product
constexpr uint64_t kX63 = uint64_t{x_pow_mod(63)} << 32;  // U1 (x^64 mod P), likewise

__attribute__((target("pclmul,sse4.1"))) inline __m128i constants(Fold f) {
  return _mm_set_epi64x(static_cast<long long>(f.for_low), static_cast<long long>(f.for_high));
}

// a folded onto the block `next`, k from constants().
__attribute__((target("pclmul,sse4.1"))) inline __m128i fold(__m128i a, __m128i k, __m128i next) {
  return _mm_xor_si128(
      _mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11)), next);
}

__attribute__((target("pclmul,sse4.1"))) inline __m128i load(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// The CRC register for the block x, with everything before it folded in.
__attribute__((target("pclmul,sse4.1"))) inline uint32_t reduce(__m128i r) {
  const __m128i k = _mm_set_epi64x(static_cast<long long>(kX63), static_cast<long long>(kX95));
  // U = H (x^96 mod P) + L x^32: L moves from bits 64..127 to 32..95.
  const __m128i u =
      _mm_xor_si128(_mm_clmulepi64_si128(r, k, 0x00), _mm_slli_si128(_mm_srli_si128(r, 8), 4));
  // V = U1 (x^64 mod P) + U0, in the high qword (bit 64 = x^63).
  const __m128i v = _mm_xor_si128(_mm_clmulepi64_si128(u, k, 0x10), u);
  const uint64_t v64 = static_cast<uint64_t>(_mm_extract_epi64(v, 1));
  const __m128i m = _mm_set_epi64x(static_cast<long long>(kP33), static_cast<long long>(kMu));
  // The quotient: V's top 32 bits (bit 0 = x^63) times mu, whose top 32 bits are V div P.
  const __m128i q =
      _mm_clmulepi64_si128(_mm_cvtsi64_si128(static_cast<long long>(v64 & 0xFFFFFFFFu)), m, 0x00);
  const uint64_t q32 = static_cast<uint64_t>(_mm_cvtsi128_si64(q)) & 0xFFFFFFFFu;
  const __m128i qp = _mm_clmulepi64_si128(_mm_cvtsi64_si128(static_cast<long long>(q32)), m, 0x10);
  // V + qP: the remainder is its low 32 powers, bits 32..63.
  return static_cast<uint32_t>((v64 ^ static_cast<uint64_t>(_mm_cvtsi128_si64(qp))) >> 32);
}

// Folds the whole 16-byte blocks left onto x, reduces, and finishes the last bytes by table.
__attribute__((target("pclmul,sse4.1"))) inline uint32_t finish(__m128i x, const uint8_t* p,
                                                                std::size_t size) {
  const __m128i k128 = constants(kFold128);
  for (; size >= 16; size -= 16, p += 16) x = fold(x, k128, load(p));
  return table_update(reduce(x), p, size);
}

}  // namespace

bool has_pclmul() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
}

bool has_vpclmul() {
  __builtin_cpu_init();  // the avx512f check also asks the OS (XGETBV) whether it saves zmm
  return has_pclmul() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq");
}

// Four 128-bit accumulators 64 bytes apart hide the multiplier's latency.
__attribute__((target("pclmul,sse4.1"))) uint32_t pclmul(const void* data, std::size_t size,
                                                         uint32_t crc) {
  if (size < 64) return table(data, size, crc);
  const auto* p = static_cast<const uint8_t*>(data);
  // The register is XORed into the first 32 bits of the message.
  __m128i x0 = _mm_xor_si128(load(p), _mm_cvtsi32_si128(static_cast<int>(~crc)));
  __m128i x1 = load(p + 16), x2 = load(p + 32), x3 = load(p + 48);
  p += 64;
  size -= 64;
  const __m128i k512 = constants(kFold512);
  for (; size >= 64; size -= 64, p += 64) {
    x0 = fold(x0, k512, load(p));
    x1 = fold(x1, k512, load(p + 16));
    x2 = fold(x2, k512, load(p + 32));
    x3 = fold(x3, k512, load(p + 48));
  }
  const __m128i k128 = constants(kFold128);
  __m128i x = fold(fold(fold(x0, k128, x1), k128, x2), k128, x3);
  return ~finish(x, p, size);
}

namespace {

__attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.1"))) inline __m512i fold(__m512i a,
                                                                                __m512i k,
                                                                                __m512i next) {
  // 0x96: the three-way XOR.
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(a, k, 0x00),
                                   _mm512_clmulepi64_epi128(a, k, 0x11), next, 0x96);
}

__attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.1"))) inline __m512i load512(
    const uint8_t* p) {
  return _mm512_loadu_si512(p);
}

}  // namespace

// Four 512-bit accumulators (sixteen 128-bit lanes) 256 bytes apart.
__attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.1"))) uint32_t vpclmul(const void* data,
                                                                             std::size_t size,
                                                                             uint32_t crc) {
  if (size < 512) return pclmul(data, size, crc);
  const auto* p = static_cast<const uint8_t*>(data);
  const __m512i first =
      _mm512_inserti32x4(_mm512_setzero_si512(), _mm_cvtsi32_si128(static_cast<int>(~crc)), 0);
  __m512i z0 = _mm512_xor_si512(load512(p), first);
  __m512i z1 = load512(p + 64), z2 = load512(p + 128), z3 = load512(p + 192);
  p += 256;
  size -= 256;
  const __m512i k2048 = _mm512_broadcast_i32x4(constants(kFold2048));
  for (; size >= 256; size -= 256, p += 256) {
    z0 = fold(z0, k2048, load512(p));
    z1 = fold(z1, k2048, load512(p + 64));
    z2 = fold(z2, k2048, load512(p + 128));
    z3 = fold(z3, k2048, load512(p + 192));
  }
  const __m512i k512 = _mm512_broadcast_i32x4(constants(kFold512));
  const __m512i z = fold(fold(fold(z0, k512, z1), k512, z2), k512, z3);
  const __m128i k128 = constants(kFold128);
  __m128i x = _mm512_extracti32x4_epi32(z, 0);
  x = fold(x, k128, _mm512_extracti32x4_epi32(z, 1));
  x = fold(x, k128, _mm512_extracti32x4_epi32(z, 2));
  x = fold(x, k128, _mm512_extracti32x4_epi32(z, 3));
  return ~finish(x, p, size);
}

}  // namespace aft::crc32_paths
