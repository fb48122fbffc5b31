// The bf16 and q8_0 kernels: the scalar reference against float64 and the format's definitions,
// every ISA table this CPU runs against the scalar reference (bitwise where the contract says so),
// and the batch GEMVs against the single ones, bit for bit.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "isa_table_test.h"
#include "random_vector.h"

#include "kernels/bf16.h"
#include "kernels/kernels.h"
#include "kernels/packed_weights.h"

namespace aft::kernels {
namespace {

using test_data::random_vector;

constexpr float kGuard = 12345.0f;  // written past the end of outputs: kernels must leave it
constexpr std::size_t kBlock = kQ8BlockSize;

// Every ISA name dispatch knows; those this CPU (or build) lacks are skipped.
constexpr const char* kIsaNames[] = {"avx512amx", "avx512bf16", "avx512vnni", "avx512", "avx2",
                                     "sse2",      "neondot",    "neon",       "scalar"};

float from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

uint32_t to_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// q8_0 data of a matrix or a vector.
struct Q8 {
  std::vector<int8_t> q;
  std::vector<float> d;
};

Q8 quantize(const KernelTable& k, const std::vector<float>& x) {
  Q8 out{std::vector<int8_t>(x.size()), std::vector<float>(x.size() / kBlock)};
  k.quantize_q8_0(x.size(), x.data(), out.q.data(), out.d.data());
  return out;
}

// A row-major q8_0 matrix in the kernels' layout (packed_weights.h).
Q8 pack(std::size_t rows, std::size_t cols, const Q8& w) {
  Q8 out{std::vector<int8_t>(q8_0_packed_rows(rows) * cols),
         std::vector<float>(q8_0_packed_rows(rows) * cols / kBlock)};
  pack_q8_0(rows, cols, w.q.data(), w.d.data(), out.q.data(), out.d.data());
  return out;
}

// Random values with a magnitude that changes from block to block, an all-zero block, and a block
// of values too small for a nonzero scale (amax / 127 underflows to 0).
std::vector<float> varied_values(std::size_t n, unsigned seed) {
  auto x = random_vector(n, -1.0f, 1.0f, seed);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> exponent(-20, 20);
  for (std::size_t b = 0; b < n / kBlock; ++b) {
    const float scale = std::ldexp(1.0f, exponent(rng));
    for (std::size_t i = 0; i < kBlock; ++i) x[b * kBlock + i] *= scale;
  }
  if (n >= 3 * kBlock) {
    for (std::size_t i = 0; i < kBlock; ++i) x[kBlock + i] = 0.0f;
    for (std::size_t i = 0; i < kBlock; ++i) x[2 * kBlock + i] = i % 2 ? 1e-45f : -1e-45f;
  }
  return x;
}

// A block where x / d falls exactly halfway between integers: amax = 127 makes d = 1.
std::vector<float> tie_values() {
  std::vector<float> x(2 * kBlock);
  for (std::size_t i = 0; i < kBlock; ++i) {
    x[i] = (i % 2 ? -1.0f : 1.0f) * (static_cast<float>(i) + 0.5f);
    x[kBlock + i] = -126.5f + static_cast<float>(i);  // ties near the ends of the range
  }
  x[0] = 127.0f;
  x[kBlock] = -127.0f;
  return x;
}

// ---------------------------------------------------------------------------------------------
// Dispatch.

TEST(QuantizedDispatch, TablesAreComplete) {
  for (const char* name : kIsaNames) {
    const KernelTable* t = kernels_for_isa(name);
    if (t == nullptr) continue;
    EXPECT_STREQ(t->isa, name);
    EXPECT_NE(t->quantize_q8_0, nullptr) << name;
    EXPECT_NE(t->gemv_q8_0, nullptr) << name;
    EXPECT_NE(t->gemv_batch_q8_0, nullptr) << name;
    EXPECT_NE(t->gemv_bf16, nullptr) << name;
    EXPECT_NE(t->gemv_batch_bf16, nullptr) << name;
    EXPECT_NE(t->round_bf16, nullptr) << name;
    EXPECT_NE(t->gemv_bf16_bf16, nullptr) << name;
    EXPECT_NE(t->gemv_batch_bf16_bf16, nullptr) << name;
    EXPECT_EQ(t->gemv_prompt_q8_0_bf16 != nullptr, std::strcmp(name, "avx512amx") == 0) << name;
  }
}

#if defined(__x86_64__)
TEST(QuantizedDispatch, Avx512NeedsBytesAndVnniAndBf16AreBestWhereThere) {
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx2") &&
                      __builtin_cpu_supports("fma");
  const bool vnni = avx512 && __builtin_cpu_supports("avx512vnni");
  const bool bf16 = vnni && __builtin_cpu_supports("avx512bf16");
  EXPECT_EQ(kernels_for_isa("avx512") != nullptr, avx512);
  EXPECT_EQ(kernels_for_isa("avx512vnni") != nullptr, vnni);
  EXPECT_EQ(kernels_for_isa("avx512bf16") != nullptr, bf16);
  if (vnni && kernels_for_isa("avx512amx") == nullptr) {
    EXPECT_STREQ(choose_kernels(nullptr).table->isa, bf16 ? "avx512bf16" : "avx512vnni");
  }
}

// The AMX table is the default where the CPU has the tiles and the OS grants them; elsewhere
// naming it warns and falls back.
TEST(QuantizedDispatch, AmxIsTheDefaultWhereGranted) {
  const KernelTable* amx = kernels_for_isa("avx512amx");
  if (amx == nullptr) {
    EXPECT_STRNE(choose_kernels(nullptr).table->isa, "avx512amx");
    EXPECT_NE(choose_kernels("avx512amx").warning.find("not available"), std::string::npos);
    GTEST_SKIP() << "skipped: CPU (or OS) has no AMX int8";
  }
  EXPECT_EQ(choose_kernels(nullptr).table, amx);
  EXPECT_EQ(choose_kernels("avx512amx").table, amx);
  EXPECT_EQ(choose_kernels("avx512amx").warning, "");
  ASSERT_NE(kernels_for_isa("avx512bf16"), nullptr);  // its other entries
  EXPECT_EQ(amx->gemv_q8_0, kernels_for_isa("avx512vnni")->gemv_q8_0);
}
#endif

// ---------------------------------------------------------------------------------------------
// bf16 conversions.

TEST(Bf16, FromFloatRoundsToNearestEven) {
  struct Case {
    uint32_t f32;
    uint16_t bf16;
  };
  const Case cases[] = {
      {0x3f800000u, 0x3f80u},  // 1
      {0xbf800000u, 0xbf80u},  // -1
      {0x3f808000u, 0x3f80u},  // tie, even below: down
      {0x3f818000u, 0x3f82u},  // tie, odd below: up
      {0x3f808001u, 0x3f81u},  // above the tie
      {0x3f807fffu, 0x3f80u},  // below the tie
      {0xbf808000u, 0xbf80u},  // negative tie, even: toward zero
      {0xbf818000u, 0xbf82u},  // negative tie, odd: away from zero
      {0xbf80ffffu, 0xbf81u},  // negative, rounds to the larger magnitude
      {0x00000000u, 0x0000u},  // 0
      {0x80000000u, 0x8000u},  // -0
      {0x00018000u, 0x0002u},  // subnormal tie
      {0x7f7fffffu, 0x7f80u},  // the largest float rounds to infinity
      {0xff7fffffu, 0xff80u},  // and the most negative to -infinity
      {0x7f800000u, 0x7f80u},  // infinity
      {0xff800000u, 0xff80u},  // -infinity
  };
  for (const Case& c : cases) {
    EXPECT_EQ(f32_to_bf16(from_bits(c.f32)), c.bf16) << std::hex << c.f32;
  }
  // A NaN whose payload is only in the dropped bits stays a NaN (it would round to infinity).
  for (uint32_t nan : {0x7f800001u, 0xffc00000u, 0x7fffffffu}) {
    const float widened = from_bits(uint32_t{f32_to_bf16(from_bits(nan))} << 16);
    EXPECT_TRUE(std::isnan(widened)) << std::hex << nan;
  }
}

TEST(Bf16, RoundTripKeepsBf16Values) {
  const auto x = random_vector(1000, -1e6f, 1e6f, 1);
  for (float v : x) {
    const uint16_t b = f32_to_bf16(v);
    const float widened = from_bits(uint32_t{b} << 16);
    EXPECT_EQ(f32_to_bf16(widened), b) << v;
    // Nearest: within half a unit of the 8-bit significand.
    EXPECT_LE(std::fabs(widened - v), std::ldexp(std::fabs(v), -8)) << v;
  }
}

// ---------------------------------------------------------------------------------------------
// The scalar reference against the definitions and float64.

TEST(QuantizedReference, QuantizeFollowsTheFormat) {
  const KernelTable& k = scalar_kernels();
  auto x = varied_values(4 * kBlock, 2);
  const auto ties = tie_values();
  x.insert(x.end(), ties.begin(), ties.end());
  const Q8 out = quantize(k, x);
  for (std::size_t b = 0; b < x.size() / kBlock; ++b) {
    double amax = 0.0;
    for (std::size_t i = 0; i < kBlock; ++i)
      amax = std::max(amax, std::fabs(double(x[b * kBlock + i])));
    const float d = static_cast<float>(amax) / 127.0f;
    EXPECT_EQ(to_bits(out.d[b]), to_bits(d)) << "block " << b;
    for (std::size_t i = 0; i < kBlock; ++i) {
      const std::size_t e = b * kBlock + i;
      int expected = 0;
      if (d != 0.0f) {
        // Round half to even, written out, of the binary32 quotient.
        const double quotient = x[e] / d;
        const double lower = std::floor(quotient);
        const double frac = quotient - lower;
        expected = static_cast<int>(
            frac > 0.5 || (frac == 0.5 && std::fmod(lower, 2.0) != 0.0) ? lower + 1 : lower);
        expected = std::max(-127, std::min(127, expected));
      }
      EXPECT_EQ(out.q[e], expected) << "element " << e << " x " << x[e] << " d " << d;
    }
  }
  // The tie block: d = 1, so q is the tie rounded to even.
  const std::size_t t = 4 * kBlock;
  EXPECT_EQ(out.d[4], 1.0f);
  EXPECT_EQ(out.q[t + 1], -2);             // -1.5
  EXPECT_EQ(out.q[t + 2], 2);              // 2.5
  EXPECT_EQ(out.q[t + 3], -4);             // -3.5
  EXPECT_EQ(out.q[t + kBlock + 1], -126);  // -125.5
  EXPECT_EQ(out.q[t + kBlock], -127);
  // The zero and underflowing blocks.
  EXPECT_EQ(out.d[1], 0.0f);
  EXPECT_EQ(out.d[2], 0.0f);
  for (std::size_t i = kBlock; i < 3 * kBlock; ++i) EXPECT_EQ(out.q[i], 0);
}

// The packed layout, place by place: 4 columns of each of 16 rows side by side, block after block,
// a group of 16 rows where its first row is in the row-major layout, padding rows all zero.
TEST(QuantizedPacking, PackPlacesEveryWeightAndScale) {
  const std::size_t rows = 21, cols = 64, blocks = cols / kBlock;
  Q8 w{std::vector<int8_t>(rows * cols), std::vector<float>(rows * blocks)};
  for (std::size_t i = 0; i < w.q.size(); ++i) w.q[i] = static_cast<int8_t>(i % 251 - 125);
  for (std::size_t i = 0; i < w.d.size(); ++i) w.d[i] = static_cast<float>(i + 1);
  const Q8 p = pack(rows, cols, w);
  ASSERT_EQ(p.q.size(), 32 * cols);
  // Row 0's first 4 columns, then row 1's; column 4 (step 1) after all 16 rows of step 0.
  EXPECT_EQ(p.q[0], w.q[0]);
  EXPECT_EQ(p.q[3], w.q[3]);
  EXPECT_EQ(p.q[4], w.q[cols]);
  EXPECT_EQ(p.q[64], w.q[4]);
  EXPECT_EQ(p.q[512], w.q[32]);               // block 1 of the first group
  EXPECT_EQ(p.q[16 * cols], w.q[16 * cols]);  // the second group starts where row 16 did
  EXPECT_EQ(p.d[16], w.d[1]);                 // row 0's block 1 after the 16 rows' block 0
  EXPECT_EQ(p.d[16 * blocks], w.d[16 * blocks]);
  for (std::size_t r = 0; r < 32; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      const int8_t want = r < rows ? w.q[r * cols + c] : 0;
      ASSERT_EQ(p.q[q8_0_packed_quant(r, c, cols)], want) << r << ", " << c;
    }
    for (std::size_t b = 0; b < blocks; ++b) {
      ASSERT_EQ(p.d[q8_0_packed_scale(r, b, cols)], r < rows ? w.d[r * blocks + b] : 0.0f);
    }
  }
}

// Packing shares groups of rows out to threads: any thread count must give the bytes of one, on
// shapes with more groups than threads and a partial last group.
TEST(QuantizedPacking, PackingOnSeveralThreadsGivesTheBytesOfOne) {
  const std::size_t rows = 203, cols = 96;
  Q8 w{std::vector<int8_t>(rows * cols), std::vector<float>(rows * cols / kBlock)};
  for (std::size_t i = 0; i < w.q.size(); ++i) w.q[i] = static_cast<int8_t>(i % 251 - 125);
  for (std::size_t i = 0; i < w.d.size(); ++i) w.d[i] = static_cast<float>(i + 1);
  std::vector<uint16_t> halves(rows * cols);
  for (std::size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i * 977 + 1);
  std::vector<float> floats(rows * cols);
  for (std::size_t i = 0; i < floats.size(); ++i) floats[i] = static_cast<float>(i) * -0.375f + 1;
  const std::size_t q8_bytes = PackedWeights::q8_0_bytes(rows, cols);
  const std::size_t bf16_bytes = PackedWeights::bf16_bytes(rows, cols);
  const std::size_t f32_bytes = PackedWeights::f32_bytes(rows, cols);
  const auto packed = [&](int threads) {
    PackedWeights room(q8_bytes + bf16_bytes + f32_bytes, threads);
    const WeightMatrix q8 = room.add_q8_0(rows, cols, w.q.data(), w.d.data());
    const WeightMatrix bf16 = room.add_bf16(rows, cols, halves.data());
    const WeightMatrix f32 = room.add_f32(rows, cols, floats.data());
    const auto bytes = [](const void* p, std::size_t n) {
      const auto* b = static_cast<const unsigned char*>(p);
      return std::vector<unsigned char>(b, b + n);
    };
    const std::size_t q8_values = q8_0_packed_rows(rows) * cols;
    return std::vector<std::vector<unsigned char>>{
        bytes(q8.data, q8_values), bytes(q8.scales, q8_values / kBlock * sizeof(float)),
        bytes(bf16.data, bf16_packed_size(rows, cols) * sizeof(uint16_t)),
        bytes(f32.data, f32_packed_rows(rows) * cols * sizeof(float))};
  };
  const auto one = packed(1);
  EXPECT_EQ(static_cast<int8_t>(one[0][q8_0_packed_quant(202, 95, cols)]), w.q[202 * cols + 95]);
  for (int threads : {2, 3, 8, 64}) {
    const auto several = packed(threads);
    for (std::size_t m = 0; m < one.size(); ++m) {
      EXPECT_TRUE(several[m] == one[m]) << "plane " << m << " on " << threads << " threads";
    }
  }
}

// A model's copies share one allocation sized up front: each lands 64-byte aligned with the
// values of its packing, and one more than the room reserved is refused, not written past it.
TEST(QuantizedPacking, PackedWeightsFillTheRoomReservedAndNoMore) {
  const std::size_t rows = 21, cols = 64;
  Q8 w{std::vector<int8_t>(rows * cols), std::vector<float>(rows * cols / kBlock)};
  for (std::size_t i = 0; i < w.q.size(); ++i) w.q[i] = static_cast<int8_t>(i % 251 - 125);
  for (std::size_t i = 0; i < w.d.size(); ++i) w.d[i] = static_cast<float>(i + 1);
  std::vector<uint16_t> halves(5 * 40);
  for (std::size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i * 977);
  std::vector<float> floats(3 * 7);
  for (std::size_t i = 0; i < floats.size(); ++i) floats[i] = static_cast<float>(i) * -0.375f;
  PackedWeights room(PackedWeights::q8_0_bytes(rows, cols) + PackedWeights::f32_bytes(3, 7) +
                     PackedWeights::bf16_bytes(5, 40));
  const WeightMatrix q8 = room.add_q8_0(rows, cols, w.q.data(), w.d.data());
  // 3 rows padded to a group of 16, 448 bytes: the next matrix still starts on a cache line.
  const WeightMatrix f32 = room.add_f32(3, 7, floats.data());
  const WeightMatrix bf16 = room.add_bf16(5, 40, halves.data());
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 64 == 0; };
  EXPECT_TRUE(aligned(q8.data) && aligned(q8.scales) && aligned(f32.data) && aligned(bf16.data));
  EXPECT_EQ(f32.type, WeightType::F32);
  EXPECT_NE(f32.data, static_cast<const void*>(floats.data()));
  for (std::size_t r = 0; r < kF32GroupRows; ++r) {
    for (std::size_t c = 0; c < 7; ++c) {
      EXPECT_EQ(f32.f32_rows(0, 7)[f32_packed_index(r, c, 7)], r < 3 ? floats[r * 7 + c] : 0.0f)
          << "f32 (" << r << ", " << c << ")";
    }
  }
  std::vector<float> columns(7 * 3);
  unpack_f32_columns(0, 3, 7, f32.f32_rows(0, 7), columns.data());
  for (std::size_t i = 0; i < columns.size(); ++i) {
    EXPECT_EQ(columns[i], floats[i % 3 * 7 + i / 3]) << "column " << i / 3 << ", row " << i % 3;
  }

  const Q8 want = pack(rows, cols, w);
  const auto* quants = static_cast<const int8_t*>(q8.data);
  EXPECT_TRUE(std::equal(want.q.begin(), want.q.end(), quants));
  EXPECT_TRUE(std::equal(want.d.begin(), want.d.end(), q8.scales));
  std::vector<uint16_t> packed_bf16(bf16_packed_size(5, 40));
  pack_bf16(5, 40, halves.data(), packed_bf16.data());
  EXPECT_TRUE(
      std::equal(packed_bf16.begin(), packed_bf16.end(), static_cast<const uint16_t*>(bf16.data)));
  EXPECT_THROW(room.add_bf16(1, 1, halves.data()), std::length_error);
}

TEST(QuantizedReference, QuantizeIsWithinHalfAStep) {
  const auto x = varied_values(19 * 8 * kBlock, 3);
  const Q8 q = quantize(scalar_kernels(), x);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float back = q.d[i / kBlock] * static_cast<float>(q.q[i]);
    // Half a step, plus the roundings of the division and the product (1e-44: the block whose
    // scale underflows to 0).
    EXPECT_LE(std::fabs(back - x[i]), (0.5 + 1e-4) * q.d[i / kBlock] + 1e-44) << i;
  }
}

// The contract's formula in float64: sum over blocks of wd * xd * isum, the isum exact integers.
// Also the magnitude the float error is relative to.
struct Q8Expected {
  double value;
  double magnitude;
};

Q8Expected q8_row_f64(std::size_t cols, const int8_t* wq, const float* wd, const Q8& x,
                      const float* bias) {
  Q8Expected e{bias ? *bias : 0.0, bias ? std::fabs(*bias) : 0.0};
  for (std::size_t b = 0; b < cols / kBlock; ++b) {
    int64_t isum = 0, iabs = 0;
    for (std::size_t i = 0; i < kBlock; ++i) {
      isum += int64_t{wq[b * kBlock + i]} * x.q[b * kBlock + i];
      iabs += std::abs(int64_t{wq[b * kBlock + i]} * x.q[b * kBlock + i]);
    }
    const double scale = double(wd[b]) * x.d[b];
    e.value += scale * double(isum);
    e.magnitude += std::fabs(scale) * double(iabs);
  }
  return e;
}

const std::vector<std::size_t> kQ8Cols = {32, 64, 96, 2048};

TEST(QuantizedReference, GemvQ8MatchesFloat64) {
  const KernelTable& k = scalar_kernels();
  for (std::size_t rows : {1, 5, 17}) {
    for (std::size_t cols : kQ8Cols) {
      const Q8 w = quantize(k, varied_values(rows * cols, 4));
      const Q8 p = pack(rows, cols, w);
      const Q8 x = quantize(k, random_vector(cols, -3.0f, 3.0f, 5));
      const auto bias = random_vector(rows, -1.0f, 1.0f, 6);
      std::vector<float> y(rows + 16, kGuard);
      k.gemv_q8_0(rows, cols, p.q.data(), p.d.data(), x.q.data(), x.d.data(), bias.data(),
                  y.data());
      for (std::size_t r = 0; r < rows; ++r) {
        const Q8Expected e = q8_row_f64(cols, &w.q[r * cols], &w.d[r * cols / kBlock], x, &bias[r]);
        // The float products wd * xd (half an ulp each) and the final rounding.
        EXPECT_LE(std::fabs(y[r] - e.value), 1e-6 * e.magnitude + 1e-6 * std::fabs(e.value))
            << rows << "x" << cols << " row " << r;
      }
      for (std::size_t i = rows; i < y.size(); ++i) EXPECT_EQ(y[i], kGuard);
    }
  }
}

std::vector<uint16_t> random_bf16(std::size_t n, unsigned seed) {
  const auto x = random_vector(n, -1.0f, 1.0f, seed);
  std::vector<uint16_t> b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = f32_to_bf16(x[i]);
  return b;
}

// A row-major bf16 matrix in the kernels' layout (packed_weights.h).
std::vector<uint16_t> pack(std::size_t rows, std::size_t cols, const std::vector<uint16_t>& w) {
  std::vector<uint16_t> p(bf16_packed_size(rows, cols));
  pack_bf16(rows, cols, w.data(), p.data());
  return p;
}

// A prefill's column block of packed f32 weights, unpacked for oneDNN: rows from a group past
// the first, one whole group and part of the next (the matrix's last, padded one).
TEST(QuantizedPacking, UnpackF32ColumnsReadsWholeAndPartialGroups) {
  const std::size_t rows = 40, cols = 9, first = 16, taken = rows - first;
  std::vector<float> w(rows * cols);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) * 0.5f - 7.0f;
  std::vector<float> packed(f32_packed_rows(rows) * cols);
  pack_f32(rows, cols, w.data(), packed.data());
  std::vector<float> columns(cols * taken, -1.0f);
  unpack_f32_columns(first, taken, cols, packed.data(), columns.data());
  for (std::size_t c = 0; c < cols; ++c) {
    for (std::size_t i = 0; i < taken; ++i) {
      EXPECT_EQ(columns[c * taken + i], w[(first + i) * cols + c])
          << "column " << c << ", row " << i;
    }
  }
}

// The packed bf16 layout, place by place: groups of 16 rows where their first row would be with
// the padded column count (whole chunks of 32), pair of columns after pair, the group's rows side
// by side, column 2p in a pair's first half.
TEST(QuantizedPacking, PackBf16PlacesEveryWeight) {
  const std::size_t rows = 20, cols = 41;  // a partial group, a partial chunk, an odd column
  std::vector<uint16_t> w(rows * cols);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint16_t>(i + 1);
  const auto p = pack(rows, cols, w);
  ASSERT_EQ(p.size(), 32u * 64u);
  EXPECT_EQ(p[0], w[0]);
  EXPECT_EQ(p[1], w[1]);     // the pair of columns 0 and 1
  EXPECT_EQ(p[2], w[cols]);  // then row 1's
  EXPECT_EQ(p[3], w[cols + 1]);
  EXPECT_EQ(p[31], w[15 * cols + 1]);
  EXPECT_EQ(p[32], w[2]);    // the next pair of the group's rows
  EXPECT_EQ(p[640], w[40]);  // column 40, pair 20
  EXPECT_EQ(p[641], 0);      // columns 41..63: padding
  EXPECT_EQ(p[1023], 0);
  EXPECT_EQ(p[1024], w[16 * cols]);  // the second group starts where row 16 would
  EXPECT_EQ(p[1024 + 8], 0);         // rows 20..31: padding
  for (std::size_t r = 0; r < 32; ++r) {
    for (std::size_t c = 0; c < 64; ++c) {
      const uint16_t want = r < rows && c < cols ? w[r * cols + c] : 0;
      ASSERT_EQ(p[bf16_packed_index(r, c, cols)], want) << r << ", " << c;
    }
  }
}

// A prefill's column block of packed bf16 weights, widened for oneDNN: every bf16 pattern, exactly,
// from a group past the first, whole groups and part of the last.
TEST(QuantizedPacking, UnpackBf16ColumnsIsExactForEveryPattern) {
  const std::size_t cols = 41;                         // an odd column in every row
  const std::size_t rows = (65536 + cols - 1) / cols;  // 1599: a partial last group
  std::vector<uint16_t> all(rows * cols);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i * 40503u);
  const auto p = pack(rows, cols, all);
  for (std::size_t first : {std::size_t{0}, std::size_t{32}}) {
    for (std::size_t taken : {std::size_t{1}, std::size_t{21}, rows - first}) {
      std::vector<float> x(cols * taken + 16, kGuard);
      unpack_bf16_columns(first, taken, cols, p.data(), x.data());
      for (std::size_t c = 0; c < cols; ++c) {
        for (std::size_t i = 0; i < taken; ++i) {
          ASSERT_EQ(to_bits(x[c * taken + i]), uint32_t{all[(first + i) * cols + c]} << 16)
              << "from row " << first << ", " << taken << " rows: column " << c << ", row " << i;
        }
      }
      for (std::size_t i = cols * taken; i < x.size(); ++i) ASSERT_EQ(x[i], kGuard);
    }
  }
}

TEST(QuantizedReference, GemvBf16MatchesFloat64) {
  const KernelTable& k = scalar_kernels();
  for (std::size_t rows : {1, 5, 17}) {
    for (std::size_t cols : {1, 7, 32, 33, 257}) {
      const auto w = random_bf16(rows * cols, 7);
      const auto x = random_vector(cols, -1.0f, 1.0f, 8);
      const auto bias = random_vector(rows, -1.0f, 1.0f, 9);
      std::vector<float> y(rows);
      k.gemv_bf16(rows, cols, pack(rows, cols, w).data(), x.data(), bias.data(), y.data());
      for (std::size_t r = 0; r < rows; ++r) {
        double sum = bias[r], magnitude = std::fabs(bias[r]);
        for (std::size_t c = 0; c < cols; ++c) {
          const double product = double(from_bits(uint32_t{w[r * cols + c]} << 16)) * x[c];
          sum += product;
          magnitude += std::fabs(product);
        }
        EXPECT_LE(std::fabs(y[r] - sum), 0x1p-23 * std::fabs(sum) + 1e-12 * magnitude)
            << rows << "x" << cols << " row " << r;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Every ISA against the reference.

class QuantizedIsaTest : public IsaTableTest {};

TEST_P(QuantizedIsaTest, QuantizeIsBitIdentical) {
  for (std::size_t n : kQ8Cols) {
    auto x = varied_values(n, 10 + n);
    const auto ties = tie_values();
    x.insert(x.end(), ties.begin(), ties.end());
    const Q8 got = quantize(k(), x), want = quantize(ref(), x);
    for (std::size_t b = 0; b < want.d.size(); ++b) {
      ASSERT_EQ(to_bits(got.d[b]), to_bits(want.d[b])) << "n=" << n << " block " << b;
    }
    for (std::size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(got.q[i], want.q[i]) << "n=" << n << " element " << i << " x " << x[i];
    }
  }
}

// Rows: groups of the kernels' row blocks with every leftover (passes of up to 64 rows, groups of
// 16, a partial group).
const std::vector<std::size_t> kRows = {1, 2, 3, 4, 5, 7, 8, 9, 17, 33, 64, 100};

TEST_P(QuantizedIsaTest, GemvQ8MatchesReference) {
  for (std::size_t rows : kRows) {
    for (std::size_t cols : kQ8Cols) {
      const Q8 w = quantize(ref(), varied_values(rows * cols, 30));
      const Q8 p = pack(rows, cols, w);
      const Q8 x = quantize(ref(), varied_values(cols, 31));
      const auto bias = random_vector(rows, -1.0f, 1.0f, 32);
      for (const float* b : {bias.data(), static_cast<const float*>(nullptr)}) {
        std::vector<float> y(rows + 16, kGuard), want(rows);
        k().gemv_q8_0(rows, cols, p.q.data(), p.d.data(), x.q.data(), x.d.data(), b, y.data());
        ref().gemv_q8_0(rows, cols, p.q.data(), p.d.data(), x.q.data(), x.d.data(), b, want.data());
        for (std::size_t r = 0; r < rows; ++r) {
          const Q8Expected e =
              q8_row_f64(cols, &w.q[r * cols], &w.d[r * cols / kBlock], x, b ? b + r : nullptr);
          // Float sums of cols / 32 block terms: measured below 1e-6.
          EXPECT_LE(std::fabs(y[r] - want[r]), 1e-5 * e.magnitude)
              << rows << "x" << cols << " row " << r << (b ? " bias" : "");
        }
        for (std::size_t i = rows; i < y.size(); ++i) ASSERT_EQ(y[i], kGuard);
      }
    }
  }
}

// Integer sums up to 2^24 and power-of-two scales: every float operation is exact, so every ISA
// gives the exact value. Quants at +-127 (the widest products: no int16 step may saturate), signs
// alternating by block and by row, and all-zero blocks (scale 0).
TEST_P(QuantizedIsaTest, GemvQ8ExtremeQuantsAreExact) {
  for (std::size_t rows : {1, 5, 9, 40, 70}) {
    for (std::size_t cols : {32, 64, 96, 256}) {
      const std::size_t blocks = cols / kBlock;
      Q8 w{std::vector<int8_t>(rows * cols), std::vector<float>(rows * blocks, 0.5f)};
      Q8 x{std::vector<int8_t>(cols), std::vector<float>(blocks, 2.0f)};
      for (std::size_t i = 0; i < w.q.size(); ++i) {
        w.q[i] = static_cast<int8_t>(((i / kBlock) % 2 ? -127 : 127) * (i % 3 == 0 ? -1 : 1));
      }
      for (std::size_t i = 0; i < cols; ++i)
        x.q[i] = static_cast<int8_t>((i / kBlock) % 3 == 2 ? 0 : -127);
      if (blocks > 1) w.d[1] = 0.0f;  // a zero block scale with nonzero quants: contributes 0
      const Q8 p = pack(rows, cols, w);
      std::vector<float> y(rows);
      k().gemv_q8_0(rows, cols, p.q.data(), p.d.data(), x.q.data(), x.d.data(), nullptr, y.data());
      for (std::size_t r = 0; r < rows; ++r) {
        const Q8Expected e = q8_row_f64(cols, &w.q[r * cols], &w.d[r * blocks], x, nullptr);
        EXPECT_EQ(y[r], e.value) << rows << "x" << cols << " row " << r;
      }
    }
  }
}

// A batch of sequences must decode as each would alone. Shapes: odd row counts, panels of 16 KB
// (100 rows of 2048 columns are several), odd vector counts and counts that the VNNI table takes 4
// at a time (and the rest together, or alone), a stride wider than the data. One vector alone, and
// two, take passes of one group (kQ8OneGroupVectors), more vectors passes of kGroups: both against
// alone.
TEST_P(QuantizedIsaTest, GemvQ8BatchHasTheBitsOfGemv) {
  for (std::size_t rows : {1, 3, 4, 5, 17, 100, 200}) {
    for (std::size_t cols : kQ8Cols) {
      for (std::size_t vectors : {1, 2, 3, 5, 6, 7, 9, 16, 33}) {
        const std::size_t y_stride = rows + 5;
        const Q8 w = pack(rows, cols, quantize(ref(), varied_values(rows * cols, 40)));
        const Q8 x = quantize(ref(), random_vector(vectors * cols, -2.0f, 2.0f, 41));
        const auto bias = random_vector(rows, -1.0f, 1.0f, 42);
        for (const float* b : {bias.data(), static_cast<const float*>(nullptr)}) {
          std::vector<float> y(vectors * y_stride + 16, kGuard);
          k().gemv_batch_q8_0(rows, cols, w.q.data(), w.d.data(), vectors, x.q.data(), x.d.data(),
                              b, y.data(), y_stride);
          for (std::size_t v = 0; v < vectors; ++v) {
            std::vector<float> alone(rows);
            k().gemv_q8_0(rows, cols, w.q.data(), w.d.data(), &x.q[v * cols],
                          &x.d[v * cols / kBlock], b, alone.data());
            for (std::size_t r = 0; r < rows; ++r) {
              ASSERT_EQ(to_bits(y[v * y_stride + r]), to_bits(alone[r]))
                  << rows << "x" << cols << ", vector " << v << " of " << vectors << ", row " << r;
            }
            for (std::size_t r = rows; r < y_stride && v + 1 < vectors; ++r) {
              ASSERT_EQ(y[v * y_stride + r], kGuard) << "wrote between rows of the output";
            }
          }
          for (std::size_t i = vectors * y_stride; i < y.size(); ++i) ASSERT_EQ(y[i], kGuard);
        }
      }
    }
  }
}

const std::vector<std::size_t> kBf16Cols = {1, 7, 16, 33, 40, 257, 2048};

// Row r of w (row-major bf16) by x, each product in column order added by an FMA (rounded once),
// or by pairs (2p, 2p + 1), column 2p + 1's first, as vdpbf16ps adds them. The sums the tables
// with FMA compute, bit for bit: gemv_bf16 the sum gemv_f32 takes of the widened weights,
// gemv_bf16_bf16 vdpbf16ps's or its emulation's. Not the avx512amx table's gemv_bf16_bf16: the
// Sapphire Rapids measured rounded its tdpbf16ps sums neither as an FMA per product (the SDM's
// pseudocode, which the emulated tiles follow) nor once per pair; its vectors' bits are still the
// same alone and in a batch (GemvBf16Bf16BatchHasTheBitsOfGemv). SSE2 has no FMA (a product and a
// sum, each rounded), and the scalar reference sums in float64.
template <class X>
float fused_sum(const std::vector<uint16_t>& w, std::size_t r, std::size_t cols, X x, bool pairs) {
  const auto value = [](uint16_t bits) { return from_bits(uint32_t{bits} << 16); };
  float sum = 0.0f;
  for (std::size_t c = 0; c < cols; c += 2) {
    const std::size_t first = pairs ? c + 1 : c, second = pairs ? c : c + 1;
    for (std::size_t i : {first, second}) {
      if (i < cols) sum = std::fma(value(w[r * cols + i]), x(i), sum);
    }
  }
  return sum;
}
bool has_fma(const KernelTable& k) {
  return std::strcmp(k.isa, "scalar") != 0 && std::strcmp(k.isa, "sse2") != 0;
}

TEST_P(QuantizedIsaTest, GemvBf16MatchesReference) {
  for (std::size_t rows : kRows) {
    for (std::size_t cols : kBf16Cols) {
      const auto w = random_bf16(rows * cols, 53);
      const auto p = pack(rows, cols, w);
      const auto x = random_vector(cols, -1.0f, 1.0f, 54);
      std::vector<float> y(rows), want(rows);
      k().gemv_bf16(rows, cols, p.data(), x.data(), nullptr, y.data());
      ref().gemv_bf16(rows, cols, p.data(), x.data(), nullptr, want.data());
      for (std::size_t r = 0; r < rows; ++r) {
        double magnitude = 0.0;
        for (std::size_t c = 0; c < cols; ++c) {
          magnitude += std::fabs(from_bits(uint32_t{w[r * cols + c]} << 16) * x[c]);
        }
        // Float FMA chains, measured below 1e-6 of the magnitudes.
        EXPECT_LE(std::fabs(y[r] - want[r]), 1e-5 * magnitude)
            << rows << "x" << cols << " row " << r;
        if (has_fma(k())) {
          const float fused = fused_sum(
              w, r, cols, [&](std::size_t c) { return x[c]; }, false);
          ASSERT_EQ(to_bits(y[r]), to_bits(fused)) << rows << "x" << cols << " row " << r;
        }
      }
    }
  }
}

TEST_P(QuantizedIsaTest, GemvBf16BatchHasTheBitsOfGemv) {
  for (std::size_t rows : {1, 3, 4, 5, 17, 100}) {
    for (std::size_t cols : kBf16Cols) {
      // 16: more vectors than a block takes on every table (8 at most), so passes of several
      // blocks, which prefetch the next pass.
      for (std::size_t vectors : {1, 2, 3, 5, 16}) {
        const std::size_t x_stride = cols + 3, y_stride = rows + 5;
        const auto w = pack(rows, cols, random_bf16(rows * cols, 55));
        const auto x = random_vector(vectors * x_stride, -1.0f, 1.0f, 56);
        const auto bias = random_vector(rows, -1.0f, 1.0f, 57);
        std::vector<float> y(vectors * y_stride + 16, kGuard);
        k().gemv_batch_bf16(rows, cols, w.data(), vectors, x.data(), x_stride, bias.data(),
                            y.data(), y_stride);
        for (std::size_t v = 0; v < vectors; ++v) {
          std::vector<float> alone(rows);
          k().gemv_bf16(rows, cols, w.data(), &x[v * x_stride], bias.data(), alone.data());
          for (std::size_t r = 0; r < rows; ++r) {
            ASSERT_EQ(to_bits(y[v * y_stride + r]), to_bits(alone[r]))
                << rows << "x" << cols << ", vector " << v << " of " << vectors << ", row " << r;
          }
        }
        for (std::size_t i = vectors * y_stride; i < y.size(); ++i) ASSERT_EQ(y[i], kGuard);
      }
    }
  }
}

// Activations rounded to bf16: f32_to_bf16 of each column, zeros up to the chunk's end, the same
// bits on every table; NaN, infinities, ties and values that round to infinity included.
TEST_P(QuantizedIsaTest, RoundBf16IsF32ToBf16) {
  for (std::size_t cols : kBf16Cols) {
    auto x = random_vector(cols, -4.0f, 4.0f, 60);
    const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                              -std::numeric_limits<float>::infinity(),
                              from_bits(0x3f808000u),  // a tie, rounds to even (down)
                              from_bits(0x3f818000u),  // a tie, rounds to even (up)
                              std::numeric_limits<float>::max(),
                              -0.0f,
                              1e-40f};
    for (std::size_t i = 0; i < std::size(specials) && 3 * i < cols; ++i) x[3 * i] = specials[i];
    const std::size_t packed = bf16_packed_cols(cols);
    std::vector<uint16_t> got(packed + 8, 0xabcd), want(packed);
    k().round_bf16(cols, x.data(), got.data());
    ref().round_bf16(cols, x.data(), want.data());
    for (std::size_t c = 0; c < packed; ++c) {
      const uint16_t expected = c < cols ? f32_to_bf16(x[c]) : 0;
      ASSERT_EQ(want[c], expected) << cols << " columns, column " << c;
      ASSERT_EQ(got[c], expected) << cols << " columns, column " << c;
    }
    for (std::size_t i = packed; i < got.size(); ++i) ASSERT_EQ(got[i], 0xabcd) << "wrote past";
  }
}

std::vector<uint16_t> rounded(const KernelTable& k, const std::vector<float>& x, std::size_t cols,
                              std::size_t vectors) {
  std::vector<uint16_t> xb(vectors * bf16_packed_cols(cols));
  for (std::size_t v = 0; v < vectors; ++v) {
    k.round_bf16(cols, &x[v * cols], &xb[v * bf16_packed_cols(cols)]);
  }
  return xb;
}

TEST_P(QuantizedIsaTest, GemvBf16Bf16MatchesReference) {
  for (std::size_t rows : kRows) {
    for (std::size_t cols : kBf16Cols) {
      const auto w = random_bf16(rows * cols, 61);
      const auto p = pack(rows, cols, w);
      const auto x = random_vector(cols, -1.0f, 1.0f, 62);
      const auto xb = rounded(ref(), x, cols, 1);
      const auto bias = random_vector(rows, -1.0f, 1.0f, 63);
      std::vector<float> y(rows + 16, kGuard), want(rows);
      k().gemv_bf16_bf16(rows, cols, p.data(), xb.data(), bias.data(), y.data());
      ref().gemv_bf16_bf16(rows, cols, p.data(), xb.data(), bias.data(), want.data());
      for (std::size_t r = 0; r < rows; ++r) {
        double magnitude = std::fabs(bias[r]);
        for (std::size_t c = 0; c < cols; ++c) {
          magnitude += std::fabs(from_bits(uint32_t{w[r * cols + c]} << 16) *
                                 from_bits(uint32_t{f32_to_bf16(x[c])} << 16));
        }
        // Exact products summed in float chains: below 1e-6 of the magnitudes, as the f32 GEMV.
        EXPECT_LE(std::fabs(y[r] - want[r]), 1e-5 * magnitude)
            << rows << "x" << cols << " row " << r;
        if (has_fma(k()) && std::strcmp(k().isa, "avx512amx") != 0) {
          const auto x_at = [&](std::size_t c) { return from_bits(uint32_t{xb[c]} << 16); };
          ASSERT_EQ(to_bits(y[r]), to_bits(fused_sum(w, r, cols, x_at, true) + bias[r]))
              << rows << "x" << cols << " row " << r;
        }
      }
      for (std::size_t i = rows; i < y.size(); ++i) ASSERT_EQ(y[i], kGuard);
    }
  }
}

TEST_P(QuantizedIsaTest, GemvBf16Bf16BatchHasTheBitsOfGemv) {
  for (std::size_t rows : {1, 3, 4, 5, 17, 100}) {
    for (std::size_t cols : kBf16Cols) {
      // 35 and 64: the tile kernel's blocks of 32 vectors (bf16_tiles.hpp), and what follows.
      for (std::size_t vectors : {1, 2, 3, 5, 7, 16, 35, 64}) {
        const std::size_t x_stride = bf16_packed_cols(cols), y_stride = rows + 5;
        const auto w = pack(rows, cols, random_bf16(rows * cols, 64));
        const auto xb =
            rounded(ref(), random_vector(vectors * cols, -1.0f, 1.0f, 65), cols, vectors);
        const auto bias = random_vector(rows, -1.0f, 1.0f, 66);
        std::vector<float> y(vectors * y_stride + 16, kGuard);
        k().gemv_batch_bf16_bf16(rows, cols, w.data(), vectors, xb.data(), x_stride, bias.data(),
                                 y.data(), y_stride);
        for (std::size_t v = 0; v < vectors; ++v) {
          std::vector<float> alone(rows);
          k().gemv_bf16_bf16(rows, cols, w.data(), &xb[v * x_stride], bias.data(), alone.data());
          for (std::size_t r = 0; r < rows; ++r) {
            ASSERT_EQ(to_bits(y[v * y_stride + r]), to_bits(alone[r]))
                << rows << "x" << cols << ", vector " << v << " of " << vectors << ", row " << r;
          }
        }
        for (std::size_t i = vectors * y_stride; i < y.size(); ++i) ASSERT_EQ(y[i], kGuard);
      }
    }
  }
}

// A prompt large enough that the tile kernel's blocks of 32 vectors pass over two slabs of rows
// (the second of an odd count of groups) and four blocks of chunks, the last one short
// (bf16_tiles.hpp): each vector still gets the bits `batch` gives it alone.
void expect_prompt_rows_have_the_bits_of_one_vector(GemvBatchBf16Bf16 batch,
                                                    const KernelTable& ref) {
  const std::size_t rows = 300, cols = 2000, vectors = 67;
  const std::size_t x_stride = bf16_packed_cols(cols), y_stride = rows + 5;
  const auto w = pack(rows, cols, random_bf16(rows * cols, 67));
  const auto xb = rounded(ref, random_vector(vectors * cols, -1.0f, 1.0f, 68), cols, vectors);
  const auto bias = random_vector(rows, -1.0f, 1.0f, 69);
  std::vector<float> y(vectors * y_stride + 16, kGuard);
  batch(rows, cols, w.data(), vectors, xb.data(), x_stride, bias.data(), y.data(), y_stride);
  for (std::size_t v = 0; v < vectors; ++v) {
    std::vector<float> alone(rows);
    batch(rows, cols, w.data(), 1, &xb[v * x_stride], 0, bias.data(), alone.data(), 0);
    for (std::size_t r = 0; r < rows; ++r) {
      ASSERT_EQ(to_bits(y[v * y_stride + r]), to_bits(alone[r]))
          << "vector " << v << " of " << vectors << ", row " << r;
    }
  }
  for (std::size_t i = vectors * y_stride; i < y.size(); ++i) ASSERT_EQ(y[i], kGuard);
}

TEST_P(QuantizedIsaTest, GemvBf16Bf16PromptCrossesSlabsAndChunkBlocks) {
  expect_prompt_rows_have_the_bits_of_one_vector(k().gemv_batch_bf16_bf16, ref());
}

// A q8_0 weight as KernelTable::gemv_prompt_q8_0_bf16 takes it: bf16(d * q), a zero or subnormal
// product a zero of its sign.
uint16_t dequantized_bf16(float d, int8_t q) {
  const float value = d * static_cast<float>(q);
  if (value == 0.0f || std::fpclassify(value) == FP_SUBNORMAL) {
    return std::signbit(value) ? uint16_t{0x8000} : uint16_t{0};
  }
  return f32_to_bf16(value);
}

// `prompt` (a gemv_prompt_q8_0_bf16) against `bf16_batch` (the same table's
// gemv_batch_bf16_bf16) on the weights dequantized by dequantized_bf16: the same bits for every
// vector, and within float rounding of the scalar reference's bf16 products. Shapes: blocks of 32
// vectors over two slabs of rows, the second an odd count of groups, and over blocks of chunks
// (2048 columns), then 3 vectors more; a partial group; fewer vectors than a block. Weights'
// scales from 2^-20 to 2^20, an all-zero block, a zero scale, and subnormal scales whose products
// are subnormal for small quants and normal for the largest.
void expect_q8_prompt_as_bf16_tiles(GemvPromptQ8Bf16 prompt, GemvBatchBf16Bf16 bf16_batch) {
  struct Shape {
    std::size_t rows, cols, vectors;
  };
  for (const Shape& s :
       {Shape{300, 2048, 67}, Shape{37, 96, 35}, Shape{100, 512, 64}, Shape{5, 32, 20}}) {
    Q8 w = quantize(scalar_kernels(), varied_values(s.rows * s.cols, 80));
    for (std::size_t b = 3; b < w.d.size(); b += 7) w.d[b] = (b % 2 ? 1e-40f : -1e-40f);
    std::vector<uint16_t> wb(s.rows * s.cols);
    for (std::size_t i = 0; i < wb.size(); ++i) wb[i] = dequantized_bf16(w.d[i / kBlock], w.q[i]);
    const Q8 p = pack(s.rows, s.cols, w);
    const auto pb = pack(s.rows, s.cols, wb);
    const std::size_t x_stride = bf16_packed_cols(s.cols), y_stride = s.rows + 3;
    const auto xb = rounded(scalar_kernels(), random_vector(s.vectors * s.cols, -2.0f, 2.0f, 81),
                            s.cols, s.vectors);
    const auto bias = random_vector(s.rows, -1.0f, 1.0f, 82);
    for (const float* b : {bias.data(), static_cast<const float*>(nullptr)}) {
      std::vector<float> y(s.vectors * y_stride + 16, kGuard), want(y.size(), kGuard);
      std::vector<float> reference(y.size(), kGuard);
      prompt(s.rows, s.cols, p.q.data(), p.d.data(), s.vectors, xb.data(), x_stride, b, y.data(),
             y_stride);
      bf16_batch(s.rows, s.cols, pb.data(), s.vectors, xb.data(), x_stride, b, want.data(),
                 y_stride);
      scalar_kernels().gemv_batch_bf16_bf16(s.rows, s.cols, pb.data(), s.vectors, xb.data(),
                                            x_stride, b, reference.data(), y_stride);
      for (std::size_t v = 0; v < s.vectors; ++v) {
        for (std::size_t r = 0; r < s.rows; ++r) {
          const std::size_t i = v * y_stride + r;
          ASSERT_EQ(to_bits(y[i]), to_bits(want[i]))
              << s.rows << "x" << s.cols << ", vector " << v << " of " << s.vectors << ", row " << r
              << (b ? ", with a bias" : "");
          double magnitude = b ? std::fabs(b[r]) : 0.0;
          for (std::size_t c = 0; c < s.cols; ++c) {
            magnitude += std::fabs(from_bits(uint32_t{wb[r * s.cols + c]} << 16) *
                                   from_bits(uint32_t{xb[v * x_stride + c]} << 16));
          }
          // The tiles flush subnormal sums to zero: rows of the subnormal scales' blocks alone.
          ASSERT_LE(std::fabs(y[i] - reference[i]),
                    1e-5 * magnitude + 4 * std::numeric_limits<float>::min())
              << s.rows << "x" << s.cols << ", vector " << v << ", row " << r;
        }
        for (std::size_t r = s.rows; r < y_stride && v + 1 < s.vectors; ++r) {
          ASSERT_EQ(y[v * y_stride + r], kGuard) << "wrote between rows of the output";
        }
      }
      for (std::size_t i = s.vectors * y_stride; i < y.size(); ++i) ASSERT_EQ(y[i], kGuard);
    }
  }
}

TEST_P(QuantizedIsaTest, GemvPromptQ8Bf16OnMatrixUnitsHasTheBitsOfTheBf16Tiles) {
  if (k().gemv_prompt_q8_0_bf16 == nullptr) {
    GTEST_SKIP() << "skipped: the " << k().isa << " table multiplies q8_0 prompts in integers";
  }
  expect_q8_prompt_as_bf16_tiles(k().gemv_prompt_q8_0_bf16, k().gemv_batch_bf16_bf16);
}

// vdpbf16ps (the avx512bf16 table) computes what the other tables emulate with FMAs: the avx512
// table runs the same passes with two FMAs a pair, so on values whose products and sums stay
// normal floats (vdpbf16ps flushes subnormals) the two give the same bits.
TEST(QuantizedDispatch, VdpbfHasTheBitsOfItsEmulation) {
  const KernelTable* bf16 = kernels_for_isa("avx512bf16");
  const KernelTable* avx512 = kernels_for_isa("avx512");
  if (bf16 == nullptr) GTEST_SKIP() << "skipped: CPU has no AVX512-BF16";
  ASSERT_NE(avx512, nullptr);
  for (std::size_t cols : {32, 40, 512, 2048}) {
    for (std::size_t vectors : {1, 6, 16}) {
      const std::size_t rows = 37;
      const auto w = pack(rows, cols, random_bf16(rows * cols, 67));
      const auto xb = rounded(*bf16, random_vector(vectors * cols, -8.0f, 8.0f, 68), cols, vectors);
      std::vector<float> got(vectors * rows), want(vectors * rows);
      bf16->gemv_batch_bf16_bf16(rows, cols, w.data(), vectors, xb.data(), bf16_packed_cols(cols),
                                 nullptr, got.data(), rows);
      avx512->gemv_batch_bf16_bf16(rows, cols, w.data(), vectors, xb.data(), bf16_packed_cols(cols),
                                   nullptr, want.data(), rows);
      for (std::size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(to_bits(got[i]), to_bits(want[i])) << cols << " columns, value " << i;
      }
    }
  }
}

#if defined(__x86_64__)
// The tile kernel of the avx512amx table over emulated tiles (emulated_tiles.h), where the CPU
// runs the table's other instructions: the bits of the VNNI GEMV for every vector. Shapes: whole
// and partial groups of rows, an odd number of blocks (the last block without a partner) and one
// block, one tile of vectors, two, and two with 3 more for the VNNI batch; quants at +-127 (the
// largest sums) and varied ones; a stride wider than the rows.
TEST(QuantizedDispatch, EmulatedTilesHaveTheBitsOfTheVnniGemv) {
  const GemvBatchQ8 tiles = emulated_tiles_gemv_batch_q8_0();
  if (tiles == nullptr) GTEST_SKIP() << "skipped: CPU has no AVX512-BF16 and AVX512CD";
  const KernelTable* vnni = kernels_for_isa("avx512vnni");
  ASSERT_NE(vnni, nullptr);
  for (std::size_t rows : {1, 5, 16, 17, 100}) {
    for (std::size_t cols : {32, 96, 512, 2048}) {
      for (std::size_t vectors : {16, 32, 35}) {
        for (bool extreme : {false, true}) {
          Q8 w = quantize(scalar_kernels(), varied_values(rows * cols, 50));
          Q8 x = quantize(scalar_kernels(), random_vector(vectors * cols, -2.0f, 2.0f, 51));
          if (extreme) {
            for (std::size_t i = 0; i < w.q.size(); ++i) w.q[i] = i % 3 ? 127 : -127;
            for (std::size_t i = 0; i < x.q.size(); ++i) x.q[i] = i % 5 ? -127 : 127;
          }
          const Q8 p = pack(rows, cols, w);
          const auto bias = random_vector(rows, -1.0f, 1.0f, 52);
          const std::size_t y_stride = rows + 3;
          for (const float* b : {bias.data(), static_cast<const float*>(nullptr)}) {
            std::vector<float> y(vectors * y_stride + 16, kGuard);
            tiles(rows, cols, p.q.data(), p.d.data(), vectors, x.q.data(), x.d.data(), b, y.data(),
                  y_stride);
            for (std::size_t v = 0; v < vectors; ++v) {
              std::vector<float> alone(rows);
              vnni->gemv_q8_0(rows, cols, p.q.data(), p.d.data(), &x.q[v * cols],
                              &x.d[v * cols / kBlock], b, alone.data());
              for (std::size_t r = 0; r < rows; ++r) {
                ASSERT_EQ(to_bits(y[v * y_stride + r]), to_bits(alone[r]))
                    << rows << "x" << cols << ", vector " << v << " of " << vectors << ", row " << r
                    << (extreme ? ", quants at 127" : "");
              }
              for (std::size_t r = rows; r < y_stride && v + 1 < vectors; ++r) {
                ASSERT_EQ(y[v * y_stride + r], kGuard) << "wrote between rows of the output";
              }
            }
            for (std::size_t i = vectors * y_stride; i < y.size(); ++i) ASSERT_EQ(y[i], kGuard);
          }
        }
      }
    }
  }
}

// The tile kernel's prompt blocks over slabs and blocks of chunks, on the tiles emulated.
TEST(QuantizedDispatch, EmulatedBf16TilesPromptCrossesSlabsAndChunkBlocks) {
  const GemvBatchBf16Bf16 tiles = emulated_tiles_gemv_batch_bf16_bf16();
  if (tiles == nullptr) GTEST_SKIP() << "skipped: CPU has no AVX512-BF16 and AVX512CD";
  expect_prompt_rows_have_the_bits_of_one_vector(tiles, scalar_kernels());
}

// q8_0 prompts on the bf16 tiles emulated: the bits of the emulated bf16 tile kernel on the
// dequantized weights.
TEST(QuantizedDispatch, EmulatedQ8PromptOnBf16TilesHasTheBitsOfTheBf16Tiles) {
  const GemvPromptQ8Bf16 prompt = emulated_tiles_gemv_prompt_q8_0_bf16();
  if (prompt == nullptr) GTEST_SKIP() << "skipped: CPU has no AVX512-BF16 and AVX512CD";
  expect_q8_prompt_as_bf16_tiles(prompt, emulated_tiles_gemv_batch_bf16_bf16());
}

// The bf16 tile kernel of the avx512amx table over emulated tiles (emulated_tiles.h). Each sum is
// tdpbf16ps's: per pair, column 2p's product, then column 2p + 1's, each an f32 FMA, pair after
// pair and chunk after chunk, which the loop below recomputes bit for bit. A vector gets the same
// bits alone (a tile of one row of activations) as beside others. Shapes: one group of rows and
// several, passes of 3, 2 and 1 groups, partial groups; one chunk, a partial chunk, many; 16
// vectors, fewer, more than a tile (16, then the rest), and blocks of 32 vectors by pairs of
// groups or a last single group, then the rest.
TEST(QuantizedDispatch, EmulatedBf16TilesSumAsTheInstruction) {
  const GemvBatchBf16Bf16 tiles = emulated_tiles_gemv_batch_bf16_bf16();
  if (tiles == nullptr) GTEST_SKIP() << "skipped: CPU has no AVX512-BF16 and AVX512CD";
  const auto value = [](uint16_t bits) { return from_bits(uint32_t{bits} << 16); };
  for (std::size_t rows : {1, 4, 5, 12, 13, 37, 100}) {
    for (std::size_t cols : {32, 40, 96, 512}) {
      for (std::size_t vectors : {1, 2, 15, 16, 17, 35, 83}) {
        const std::size_t x_stride = bf16_packed_cols(cols), y_stride = rows + 3;
        const auto w = random_bf16(rows * cols, 70);
        const auto p = pack(rows, cols, w);
        const auto xb = rounded(scalar_kernels(), random_vector(vectors * cols, -2.0f, 2.0f, 71),
                                cols, vectors);
        const auto bias = random_vector(rows, -1.0f, 1.0f, 72);
        for (const float* b : {bias.data(), static_cast<const float*>(nullptr)}) {
          std::vector<float> y(vectors * y_stride + 16, kGuard);
          tiles(rows, cols, p.data(), vectors, xb.data(), x_stride, b, y.data(), y_stride);
          for (std::size_t v = 0; v < vectors; ++v) {
            const uint16_t* x = &xb[v * x_stride];
            std::vector<float> alone(rows + 16, kGuard);
            tiles(rows, cols, p.data(), 1, x, 0, b, alone.data(), 0);
            for (std::size_t r = 0; r < rows; ++r) {
              float want = 0.0f;
              for (std::size_t c = 0; c < x_stride; ++c) {
                const float wc = c < cols ? value(w[r * cols + c]) : 0.0f;
                want = std::fma(wc, value(x[c]), want);
              }
              if (b != nullptr) want += b[r];
              ASSERT_EQ(to_bits(y[v * y_stride + r]), to_bits(want))
                  << rows << "x" << cols << ", vector " << v << " of " << vectors << ", row " << r;
              ASSERT_EQ(to_bits(alone[r]), to_bits(want))
                  << rows << "x" << cols << ", vector " << v << " alone, row " << r;
            }
            for (std::size_t r = rows; r < y_stride && v + 1 < vectors; ++r) {
              ASSERT_EQ(y[v * y_stride + r], kGuard) << "wrote between rows of the output";
            }
            for (std::size_t r = rows; r < alone.size(); ++r) ASSERT_EQ(alone[r], kGuard);
          }
          for (std::size_t i = vectors * y_stride; i < y.size(); ++i) ASSERT_EQ(y[i], kGuard);
        }
      }
    }
  }
}
#endif

INSTANTIATE_TEST_SUITE_P(AllIsas, QuantizedIsaTest, testing::ValuesIn(kIsaNames),
                         [](const testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace aft::kernels
