// Matmul (oneDNN) against a naive float64 product, in PyTorch's nn.Linear layout, and its results
// against themselves for every thread count.
#include "kernels/matmul.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/bf16.h"
#include "kernels/kernels.h"
#include "kernels/packed_weights.h"
#include "random_vector.h"

namespace aft::kernels {
namespace {

using test_data::random_vector;

// f32 weights [n, k] packed as a model's are (packed_weights.h).
struct PackedF32 {
  PackedWeights room;
  WeightMatrix matrix;
  PackedF32(std::size_t n, std::size_t k, const float* w)
      : room(PackedWeights::f32_bytes(n, k)), matrix(room.add_f32(n, k, w)) {}
};

struct Problem {
  std::size_t m, k, n;
  std::vector<float> x, w, bias;  // x [M, K], w [N, K]
  PackedF32 packed;               // w
  Problem(std::size_t m_, std::size_t k_, std::size_t n_)
      : m(m_),
        k(k_),
        n(n_),
        x(random_vector(m * k, -1.0f, 1.0f, 1)),
        w(random_vector(n * k, -1.0f, 1.0f, 2)),
        bias(random_vector(n, -1.0f, 1.0f, 3)),
        packed(n, k, w.data()) {}
  Problem(const Problem& o)
      : m(o.m), k(o.k), n(o.n), x(o.x), w(o.w), bias(o.bias), packed(n, k, w.data()) {}
};

double apply(PostOp post, double v) {
  if (post == PostOp::Relu) return v > 0.0 ? v : 0.0;
  if (post == PostOp::Gelu) return 0.5 * v * std::erfc(-v / std::sqrt(2.0));
  if (post == PostOp::ReluSquared) return v > 0.0 ? v * v : 0.0;
  return v;
}

const char* name(PostOp post) {
  switch (post) {
    case PostOp::Relu:
      return "relu";
    case PostOp::Gelu:
      return "gelu";
    case PostOp::ReluSquared:
      return "relu_squared";
    case PostOp::None:
      break;
  }
  return "none";
}

// y must be [m, n] = post(x[:m] W^T + bias) to within float accumulation error.
void expect_matches(const Problem& p, std::size_t m, bool with_bias, PostOp post,
                    const std::vector<float>& y, const std::string& where) {
  // oneDNN sums the K products in float: at most K roundings of the running sum, a bound of
  // K 2^-24 of the sum of magnitudes (1.5e-5 for K = 257), of which random-sign errors realize
  // about sqrt(K) 2^-24. gelu (slope <= 1.13) carries that error, plus oneDNN's erf (~1e-6 of |y|).
  const double tol = std::max(1e-6, static_cast<double>(p.k) * std::ldexp(1.0, -24));
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < p.n; ++j) {
      double sum = with_bias ? p.bias[j] : 0.0;
      double magnitude = std::fabs(sum);
      for (std::size_t c = 0; c < p.k; ++c) {
        const double term = double(p.x[i * p.k + c]) * p.w[j * p.k + c];
        sum += term;
        magnitude += std::fabs(term);
      }
      const double want = apply(post, sum);
      const float got = y[i * p.n + j];
      ASSERT_TRUE(std::isfinite(got)) << where;
      // Squared, an error e of the sum becomes 2 |sum| e + e^2.
      const double e = 1.13 * tol * magnitude;
      const double bound = post == PostOp::ReluSquared ? 2.0 * std::fabs(sum) * e + e * e : e;
      ASSERT_LE(std::fabs(got - want), bound + 1e-6 * std::fabs(want))
          << where << " at (" << i << ", " << j << "): got " << got << ", want " << want;
      if ((post == PostOp::Relu || post == PostOp::ReluSquared) && sum < -tol * magnitude) {
        ASSERT_EQ(got, 0.0f) << where;
      }
    }
  }
}

struct Shape {
  std::size_t m, k, n;
};

// M on both sides of the runtime-M / fixed-M switch (8), odd K and N.
constexpr Shape kShapes[] = {{1, 1, 1},    {1, 7, 5},     {2, 64, 3},    {3, 17, 9},    {8, 64, 33},
                             {9, 31, 100}, {16, 100, 17}, {37, 257, 64}, {100, 64, 129}};

TEST(Matmul, MatchesNaiveProduct) {
  for (const Shape& s : kShapes) {
    const Problem p(s.m, s.k, s.n);
    for (PostOp post : {PostOp::None, PostOp::Relu, PostOp::Gelu, PostOp::ReluSquared}) {
      for (bool with_bias : {false, true}) {
        const Matmul mm(s.k, s.n, p.packed.matrix, with_bias ? p.bias.data() : nullptr, post);
        std::vector<float> y(s.m * s.n + 8, 777.0f);
        mm.run(s.m, p.x.data(), y.data(), 2);
        const std::string where = "M=" + std::to_string(s.m) + " K=" + std::to_string(s.k) +
                                  " N=" + std::to_string(s.n) + " post=" + name(post) +
                                  (with_bias ? " bias" : "");
        expect_matches(p, s.m, with_bias, post, y, where);
        for (std::size_t i = s.m * s.n; i < y.size(); ++i) ASSERT_EQ(y[i], 777.0f) << where;
      }
    }
  }
}

// One Matmul serves every M; more distinct large M than its primitive cache holds.
TEST(Matmul, ManyRowCountsOnOneObject) {
  const Problem p(70, 48, 40);
  const Matmul mm(p.k, p.n, p.packed.matrix, p.bias.data(), PostOp::Gelu);
  for (std::size_t m : {1, 70, 9, 2, 10, 11, 12, 13, 14, 15, 16, 17, 18, 70, 9, 8, 0}) {
    std::vector<float> y(m * p.n);
    mm.run(m, p.x.data(), y.data(), 2);
    expect_matches(p, m, true, PostOp::Gelu, y, "M=" + std::to_string(m));
  }
}

TEST(Matmul, ConcurrentRuns) {
  const Problem p(64, 96, 72);
  const Matmul mm(p.k, p.n, p.packed.matrix, p.bias.data(), PostOp::Relu);
  const std::size_t rows[] = {1, 64, 5, 33};
  std::vector<std::vector<float>> outputs(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      outputs[t].assign(rows[t] * p.n, 0.0f);
      for (int repeat = 0; repeat < 5; ++repeat) mm.run(rows[t], p.x.data(), outputs[t].data(), 2);
    });
  }
  for (std::thread& th : threads) th.join();
  for (std::size_t t = 0; t < 4; ++t) {
    expect_matches(p, rows[t], true, PostOp::Relu, outputs[t], "thread " + std::to_string(t));
  }
}

// How a product is cut for a number of threads: a block for each where M allows, rows in whole
// blocks of 128; narrow products (under 4 column blocks) in blocks of 64 whatever the threads.
TEST(Matmul, BlockRowsGiveABlockPerThreadWhereRowsAllow) {
  EXPECT_EQ(matmul_block_rows(256, 2048, 16), 256u);  // 16 column blocks: whole rows
  EXPECT_EQ(matmul_block_rows(256, 4096, 16), 256u);
  EXPECT_EQ(matmul_block_rows(256, 1024, 16), 128u);  // 8 column blocks x 2 row blocks
  EXPECT_EQ(matmul_block_rows(512, 512, 16), 128u);   // 4 x 4
  EXPECT_EQ(matmul_block_rows(256, 512, 16), 128u);   // 4 x 2: never under 128 rows
  EXPECT_EQ(matmul_block_rows(256, 1061, 16), 128u);  // 9 column blocks (the last narrower) x 2
  EXPECT_EQ(matmul_block_rows(100, 1061, 16), 100u);  // under one row block
  EXPECT_EQ(matmul_block_rows(2000, 512, 64), 128u);  // 4 x 16
  EXPECT_EQ(matmul_block_rows(1000, 512, 64), 128u);  // 4 x 8: M allows no more
  EXPECT_EQ(matmul_block_rows(256, 512, 8), 128u);    // 4 x 2
  EXPECT_EQ(matmul_block_rows(256, 512, 4), 256u);    // 4 column blocks are enough
  EXPECT_EQ(matmul_block_rows(256, 512, 2), 256u);
  EXPECT_EQ(matmul_block_rows(256, 512, 1), 256u);
  EXPECT_EQ(matmul_block_rows(200, 100, 1), 64u);  // narrow: rows of 64 for any thread count
  EXPECT_EQ(matmul_block_rows(200, 384, 16), 64u);
  EXPECT_EQ(matmul_block_rows(9, 100, 16), 9u);
  EXPECT_EQ(matmul_block_rows(1, 512, 16), 1u);
  EXPECT_GE(matmul_machine_blocks(), 1u);
}

// The blocks are the unit of parallel work, cut here for 16 threads on every machine. Wide: 9
// column blocks (N = 1061), rows cut into blocks of 128 from M = 129 on (M = 130: the second row
// block of 2 rows on the runtime-M primitive). Narrow: 1 column block (N = 100), rows cut into
// blocks of 64 (M = 200: 4 row blocks, the last of 8 rows). Every row count gives the same bits for
// every thread count.
TEST(Matmul, ThreadCountDoesNotChangeResults) {
  for (const std::size_t n : {8 * kMatmulBlockColumns + 37, std::size_t{100}}) {
    const Problem p(200, 300, n);
    for (PostOp post : {PostOp::None, PostOp::Gelu}) {
      const Matmul mm(p.k, p.n, p.packed.matrix, p.bias.data(), post, 16);
      for (std::size_t m : {1, 3, 8, 9, 64, 130, 200}) {
        std::vector<float> one(m * n);
        mm.run(m, p.x.data(), one.data(), 1);
        expect_matches(p, m, true, post, one,
                       "N=" + std::to_string(n) + ", M=" + std::to_string(m));
        for (int threads : {2, 3, 4}) {
          std::vector<float> many(m * n);
          mm.run(m, p.x.data(), many.data(), threads);
          for (std::size_t i = 0; i < one.size(); ++i) {
            ASSERT_EQ(one[i], many[i])
                << "N=" << n << ", M=" << m << ", " << threads << " threads, element " << i;
          }
        }
      }
    }
  }
}

// The residual is added to each output exactly once, after the post-op, for every path (runtime
// and fixed M) and thread count.
TEST(Matmul, ResidualIsAddedToTheResult) {
  const std::size_t n = 2 * kMatmulBlockColumns + 5;
  const Problem p(64, 40, n);
  const std::vector<float> residual = random_vector(p.m * n, -4.0f, 4.0f, 4);
  const Matmul mm(p.k, p.n, p.packed.matrix, p.bias.data(), PostOp::Relu);
  for (std::size_t m : {1, 9, 64}) {
    std::vector<float> plain(m * n);
    mm.run(m, p.x.data(), plain.data(), 1);
    for (int threads : {1, 3}) {
      std::vector<float> y(m * n);
      mm.run(m, p.x.data(), y.data(), threads, residual.data());
      for (std::size_t i = 0; i < y.size(); ++i) {
        ASSERT_EQ(y[i], residual[i] + plain[i]) << "M=" << m << ", element " << i;
      }
    }
  }
}

TEST(Matmul, MovedObjectStillRuns) {
  const Problem p(12, 20, 6);
  Matmul first(p.k, p.n, p.packed.matrix, nullptr, PostOp::None);
  Matmul second = std::move(first);
  const PackedF32 one(1, 1, p.w.data());
  Matmul third(1, 1, one.matrix, nullptr, PostOp::None);
  third = std::move(second);
  std::vector<float> y(p.m * p.n);
  third.run(p.m, p.x.data(), y.data(), 2);
  expect_matches(p, p.m, false, PostOp::None, y, "moved");
}

// The shapes of a 12-layer d = 512 model: the slow reference implementation would be a
// performance bug. The names are printed for the record.
TEST(Matmul, ModelShapesAvoidReferenceImplementation) {
  const Shape shapes[] = {{0, 512, 512}, {0, 512, 2048}, {0, 2048, 512}};
  for (const Shape& s : shapes) {
    const auto w = random_vector(s.k * s.n, -1.0f, 1.0f, 4);
    const auto bias = random_vector(s.n, -1.0f, 1.0f, 5);
    const PackedF32 packed(s.n, s.k, w.data());
    for (PostOp post : {PostOp::None, PostOp::Relu, PostOp::Gelu}) {
      const Matmul mm(s.k, s.n, packed.matrix, bias.data(), post);
      const std::string impl = mm.implementation();
      std::cout << "K=" << s.k << " N=" << s.n << " post=" << name(post) << ": " << impl << "\n";
      EXPECT_FALSE(impl.empty());
      EXPECT_NE(impl.rfind("ref", 0), 0u) << impl;
      EXPECT_EQ(impl.find("ref"), std::string::npos) << impl;
    }
  }
}

// bf16 weights off the matrix units are widened exactly: their products are those of the widened
// values (within float accumulation error: packed f32 weights reach oneDNN in another layout, so
// not their bits), the same bits on every thread count. Cut for 16 threads, the last two shapes
// cut rows too (blocks of 64 and of 128): a thread widens a column block once for the row blocks
// it takes in a row.
TEST(Matmul, WidenedWeightsGiveTheProductOfTheirValues) {
  const Shape shapes[] = {{1, 32, 3}, {5, 64, 130}, {9, 96, 129}, {70, 64, 300}, {200, 64, 600}};
  for (const Shape& s : shapes) {
    // On matrix units bf16 products of more than 8 rows round x too (the test below).
    if (s.m > 8 && !matrix_units().empty()) continue;
    const Problem p(s.m, s.k, s.n);
    std::vector<uint16_t> bf16(p.w.size());
    std::vector<float> bf16_values(p.w.size());
    for (std::size_t i = 0; i < bf16.size(); ++i) {
      bf16[i] = f32_to_bf16(p.w[i]);
      bf16_values[i] = bf16_to_float(bf16[i]);
    }
    PackedWeights room(PackedWeights::bf16_bytes(s.n, s.k));
    const WeightMatrix packed = room.add_bf16(s.n, s.k, bf16.data());
    const Matmul widened(p.k, p.n, packed, p.bias.data(), PostOp::Gelu, 16);
    std::vector<float> want(p.m * p.n), got(p.m * p.n);
    widened.run(p.m, p.x.data(), want.data(), 1);
    Problem values = p;
    values.w = bf16_values;
    expect_matches(
        values, p.m, true, PostOp::Gelu, want,
        "M=" + std::to_string(s.m) + " K=" + std::to_string(s.k) + " N=" + std::to_string(s.n));
    for (int threads : {2, 3}) {
      widened.run(p.m, p.x.data(), got.data(), threads);
      for (std::size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(got[i], want[i]) << "M=" << s.m << " K=" << s.k << " N=" << s.n << ", " << threads
                                   << " threads, value " << i;
      }
    }
  }
}

// The matrix units taken for each AFT_MATRIX_UNITS setting and oneDNN implementation: AMX by
// default, AVX512-BF16 by default only where it outpaces FMAs, either when asked (on), neither off,
// never a reference loop or a product without the units, and a warning for what is not honoured.
TEST(Matmul, MatrixUnitsFollowTheSettingAndTheCpu) {
  const std::string amx = "brg:avx512_core_amx_bf16", bf16 = "brg:avx512_core_bf16";
  for (const char* setting : {static_cast<const char*>(nullptr), "", "auto"}) {
    EXPECT_EQ(choose_matrix_units(setting, amx, false).units, amx);
    EXPECT_EQ(choose_matrix_units(setting, bf16, true).units, bf16);
    EXPECT_EQ(choose_matrix_units(setting, bf16, false).units, "");
    EXPECT_EQ(choose_matrix_units(setting, "brg:avx512_core", true).units, "");
    EXPECT_EQ(choose_matrix_units(setting, "ref:any", true).units, "");
    EXPECT_EQ(choose_matrix_units(setting, "", true).units, "");
    EXPECT_EQ(choose_matrix_units(setting, bf16, false).warning, "");
    EXPECT_EQ(choose_matrix_units(setting, bf16, false).passed_over, bf16);
    EXPECT_EQ(choose_matrix_units(setting, bf16, true).passed_over, "");
    EXPECT_EQ(choose_matrix_units(setting, amx, false).passed_over, "");
  }
  for (const char* on : {"on", "1"}) {
    EXPECT_EQ(choose_matrix_units(on, bf16, false).units, bf16);
    EXPECT_EQ(choose_matrix_units(on, amx, false).units, amx);
    EXPECT_EQ(choose_matrix_units(on, bf16, false).warning, "");
    const MatrixUnitChoice none = choose_matrix_units(on, "gemm:jit", true);
    EXPECT_EQ(none.units, "");
    EXPECT_NE(none.warning.find("no AMX or AVX512-BF16"), std::string::npos) << none.warning;
  }
  for (const char* off : {"off", "0"}) {
    EXPECT_EQ(choose_matrix_units(off, amx, true).units, "");
    EXPECT_EQ(choose_matrix_units(off, bf16, true).units, "");
    EXPECT_EQ(choose_matrix_units(off, amx, true).warning, "");
  }
  const MatrixUnitChoice unknown = choose_matrix_units("yes", amx, false);
  EXPECT_EQ(unknown.units, amx);
  EXPECT_NE(unknown.warning.find("AFT_MATRIX_UNITS=yes is unknown"), std::string::npos);
  EXPECT_EQ(choose_matrix_units("yes", bf16, false).units, "");
}

// bf16 weights on the matrix units (AMX, AVX512-BF16): the product of x rounded to bf16 (to nearest
// even) and the weights, summed in f32, for products of more than 8 rows, every row block of them
// (M = 130 and 200 end in blocks of 2 and 8 rows); the same bits for every thread count, and a
// second object (its own copy of W) gives them too. K = 100: a thread's share of x ends inside a
// chunk of 32 values, whose tail is rounded apart.
TEST(Matmul, Bf16WeightsOnMatrixUnitsRoundTheInputsOnly) {
  if (matrix_units().empty()) {
    GTEST_SKIP() << "skipped: no matrix units taken (no AMX/AVX512-BF16, Intel's AVX512-BF16 "
                    "unless AFT_MATRIX_UNITS=on, or =off)";
  }
  const Shape shapes[] = {
      {9, 64, 130}, {64, 512, 300}, {130, 256, 1061}, {200, 96, 129}, {37, 100, 70}};
  for (const Shape& s : shapes) {
    Problem p(s.m, s.k, s.n);
    std::vector<uint16_t> bf16(p.w.size());
    for (std::size_t i = 0; i < bf16.size(); ++i) {
      bf16[i] = f32_to_bf16(p.w[i]);
      p.w[i] = bf16_to_float(bf16[i]);
    }
    Problem rounded = p;
    for (float& v : rounded.x) v = bf16_to_float(f32_to_bf16(v));
    PackedWeights room(PackedWeights::bf16_bytes(s.n, s.k));
    const WeightMatrix packed = room.add_bf16(s.n, s.k, bf16.data());
    for (PostOp post : {PostOp::None, PostOp::Gelu}) {
      const Matmul mm(p.k, p.n, packed, p.bias.data(), post, 16);
      const std::string where = "M=" + std::to_string(s.m) + " K=" + std::to_string(s.k) +
                                " N=" + std::to_string(s.n) + ", " + name(post);
      std::vector<float> one(p.m * p.n);
      mm.run(p.m, p.x.data(), one.data(), 1);
      expect_matches(rounded, p.m, true, post, one, where);
      for (int threads : {2, 3, 16}) {
        std::vector<float> many(p.m * p.n);
        const Matmul fresh(p.k, p.n, packed, p.bias.data(), post, 16);
        (threads == 3 ? fresh : mm).run(p.m, p.x.data(), many.data(), threads);
        for (std::size_t i = 0; i < one.size(); ++i) {
          ASSERT_EQ(one[i], many[i]) << where << ", " << threads << " threads, element " << i;
        }
      }
      // Sessions sharing a model call its first product at once: one makes the copy of W.
      const Matmul shared(p.k, p.n, packed, p.bias.data(), post, 16);
      std::vector<std::vector<float>> outputs(4, std::vector<float>(p.m * p.n));
      std::vector<std::thread> callers;
      for (std::vector<float>& out : outputs) {
        callers.emplace_back([&] { shared.run(p.m, p.x.data(), out.data(), 2); });
      }
      for (std::thread& caller : callers) caller.join();
      for (const std::vector<float>& out : outputs) ASSERT_EQ(out, one) << where << ", concurrent";
    }
  }
}

// MatmulPrecision::BF16: f32 weights computed as their bf16 rounding. On matrix units, products of
// more than 8 rows give the bits of the same weights stored in bf16 (Bf16WeightsOnMatrixUnits...),
// those of up to 8 rows stay exact f32; without units every product is the exact f32 one.
TEST(Matmul, F32WeightsAtBf16PrecisionAreTheirBf16Rounding) {
  const Shape shapes[] = {{4, 64, 130}, {9, 64, 130}, {130, 256, 1061}};
  for (const Shape& s : shapes) {
    const Problem p(s.m, s.k, s.n);
    std::vector<uint16_t> bf16(p.w.size());
    for (std::size_t i = 0; i < bf16.size(); ++i) bf16[i] = f32_to_bf16(p.w[i]);
    PackedWeights room(PackedWeights::bf16_bytes(s.n, s.k));
    const WeightMatrix packed = room.add_bf16(s.n, s.k, bf16.data());
    const Matmul exact(p.k, p.n, p.packed.matrix, p.bias.data(), PostOp::Gelu, 16);
    const Matmul stored_bf16(p.k, p.n, packed, p.bias.data(), PostOp::Gelu, 16);
    const Matmul at_bf16(p.k, p.n, p.packed.matrix, p.bias.data(), PostOp::Gelu, 16,
                         MatmulPrecision::BF16);
    const bool on_units = !matrix_units().empty() && s.m > 8;
    std::vector<float> want(p.m * p.n), exact_bits(p.m * p.n);
    (on_units ? stored_bf16 : exact).run(p.m, p.x.data(), want.data(), 2);
    exact.run(p.m, p.x.data(), exact_bits.data(), 2);
    if (on_units) {
      EXPECT_NE(want, exact_bits) << "the rounding must show";
    }
    for (int threads : {1, 3}) {
      std::vector<float> got(p.m * p.n);
      at_bf16.run(p.m, p.x.data(), got.data(), threads);
      ASSERT_EQ(got, want) << "M=" << s.m << " K=" << s.k << " N=" << s.n << ", " << threads
                           << " threads, " << (on_units ? "on " + matrix_units() : "exact f32");
    }
  }
}

TEST(Matmul, RejectsInvalidShapes) {
  const float one = 1.0f;
  const WeightMatrix w(WeightType::F32, &one, nullptr);
  EXPECT_THROW(Matmul(0, 4, w, nullptr, PostOp::None), std::invalid_argument);
  EXPECT_THROW(Matmul(4, 0, w, nullptr, PostOp::None), std::invalid_argument);
  EXPECT_THROW(Matmul(std::size_t{1} << 40, 4, w, nullptr, PostOp::None), std::invalid_argument);
  EXPECT_THROW(Matmul(4, 4, WeightMatrix(WeightType::F32, nullptr, nullptr), nullptr, PostOp::None),
               std::invalid_argument);
  const int8_t quants[64] = {};
  const float scales[2] = {};
  EXPECT_THROW(Matmul(32, 2, WeightMatrix(WeightType::Q8_0, quants, scales), nullptr, PostOp::None),
               std::invalid_argument);  // the integer GEMV kernels' weights
}

TEST(Matmul, RowCountBeyondOneDnnIsAnError) {
  const float w[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  const PackedF32 packed(2, 2, w);
  const Matmul mm(2, 2, packed.matrix, nullptr, PostOp::None);
  float x = 0.0f, y = 0.0f;
  // SIZE_MAX rows would be the dimension -1 to oneDNN: rejected before any memory is touched.
  try {
    mm.run(SIZE_MAX, &x, &y, 2);
    FAIL() << "expected an error for M = SIZE_MAX";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("oneDNN"), std::string::npos) << what;
    EXPECT_NE(what.find("K=2, N=2"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace aft::kernels
