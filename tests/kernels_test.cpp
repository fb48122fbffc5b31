// The vector kernels: the scalar reference against straightforward float64 computations, and every
// ISA table this CPU runs against the scalar reference, over sizes with and without SIMD tails.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include "isa_table_test.h"
#include "long_run.h"
#include "random_vector.h"

#include "kernels/kernels.h"
#include "kernels/packed_weights.h"

namespace aft::kernels {
namespace {

using test_data::random_vector;

constexpr double kUlp = 1.0 / (1 << 23);  // float epsilon, 2^-23
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr double kFloatMin = std::numeric_limits<float>::min();  // smallest normal float
constexpr float kGuard = 12345.0f;  // written past the end of outputs: kernels must leave it

const std::vector<std::size_t> kSizes = {1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 64, 100, 257, 1000};

// Row-major f32 weights [rows, cols] packed as a model's are (packed_weights.h).
std::vector<float> packed_f32(std::size_t rows, std::size_t cols, const std::vector<float>& w) {
  std::vector<float> p(f32_packed_rows(rows) * cols);
  pack_f32(rows, cols, w.data(), p.data());
  return p;
}

std::vector<double> as_doubles(const std::vector<float>& x) { return {x.begin(), x.end()}; }

// n outputs followed by guard values.
std::vector<float> guarded(std::size_t n) { return std::vector<float>(n + 16, kGuard); }

void expect_guard_intact(const std::vector<float>& v, std::size_t n) {
  for (std::size_t i = n; i < v.size(); ++i) ASSERT_EQ(v[i], kGuard) << "write past n=" << n;
}

// |actual - expected| <= tol * scale, where scale is the magnitude the error is relative to (for a
// sum with cancellation, the sum of the magnitudes of its terms).
// atol admits results that underflow (subnormal or flushed to zero).
void expect_close(double actual, double expected, double scale, double tol, const std::string& what,
                  double atol = 0.0) {
  ASSERT_TRUE(std::isfinite(actual)) << what;
  EXPECT_LE(std::fabs(actual - expected), tol * scale + atol)
      << what << ": actual " << actual << ", expected " << expected << ", scale " << scale;
}

// ---------------------------------------------------------------------------------------------
// Dispatch.

// The tables of distinct f32 kernels, best first (avx512amx, chosen before them all where the OS
// grants the tiles, has avx512bf16's, and neondot neon's: quantized_kernels_test.cpp tests their
// own).
constexpr const char* kIsaNames[] = {"avx512bf16", "avx512vnni", "avx512", "avx2",
                                     "sse2",       "neon",       "scalar"};

TEST(Dispatch, ScalarIsAlwaysAvailable) {
  EXPECT_EQ(kernels_for_isa("scalar"), &scalar_kernels());
  EXPECT_STREQ(scalar_kernels().isa, "scalar");
}

TEST(Dispatch, UnknownNamesGiveNull) {
  EXPECT_EQ(kernels_for_isa(nullptr), nullptr);
  EXPECT_EQ(kernels_for_isa(""), nullptr);
  EXPECT_EQ(kernels_for_isa("avx3"), nullptr);
  EXPECT_EQ(kernels_for_isa("AVX2"), nullptr);
}

TEST(Dispatch, TablesAreComplete) {
  for (const char* name : kIsaNames) {
    const KernelTable* t = kernels_for_isa(name);
    if (t == nullptr) continue;
    EXPECT_STREQ(t->isa, name);
    EXPECT_NE(t->gemv_f32, nullptr);
    EXPECT_NE(t->layer_norm_f32, nullptr);
    EXPECT_NE(t->aft_accumulate_f32, nullptr);
    EXPECT_NE(t->aft_accumulate_biased_f32, nullptr);
    EXPECT_NE(t->aft_output_f32, nullptr);
    EXPECT_NE(t->relu_f32, nullptr);
    EXPECT_NE(t->gelu_f32, nullptr);
    EXPECT_NE(t->relu_squared_f32, nullptr);
    EXPECT_NE(t->gated_add_f32, nullptr);
    EXPECT_NE(t->add_f32, nullptr);
    EXPECT_NE(t->sum_f32, nullptr);
    EXPECT_NE(t->fma_probe_f32, nullptr);
  }
}

#if defined(__x86_64__)
TEST(Dispatch, X86TablesFollowCpuFeatures) {
  EXPECT_NE(kernels_for_isa("sse2"), nullptr);
  EXPECT_EQ(kernels_for_isa("neon"), nullptr);
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  EXPECT_EQ(kernels_for_isa("avx2") != nullptr, avx2);
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw");
  EXPECT_EQ(kernels_for_isa("avx512") != nullptr, avx512);
  EXPECT_EQ(kernels_for_isa("avx512vnni") != nullptr,
            avx512 && __builtin_cpu_supports("avx512vnni"));
  EXPECT_EQ(kernels_for_isa("avx512bf16") != nullptr,
            avx512 && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bf16"));
}
#endif

#if defined(__aarch64__) && defined(__linux__)
TEST(Dispatch, NeonTablesFollowCpuFeatures) {
  EXPECT_EQ(kernels_for_isa("sse2"), nullptr);
  const KernelTable* neon = kernels_for_isa("neon");
  ASSERT_NE(neon, nullptr);
  const KernelTable* dot = kernels_for_isa("neondot");
  EXPECT_EQ(dot != nullptr, (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0);
  if (dot == nullptr) return;
  // The neon table but for its q8_0 GEMVs.
  EXPECT_EQ(dot->gemv_f32, neon->gemv_f32);
  EXPECT_EQ(dot->quantize_q8_0, neon->quantize_q8_0);
  EXPECT_EQ(dot->gemv_bf16, neon->gemv_bf16);
  EXPECT_NE(dot->gemv_q8_0, neon->gemv_q8_0);
  EXPECT_NE(dot->gemv_batch_q8_0, neon->gemv_batch_q8_0);
}
#endif

// The tables that differ from the one after them in their 8-bit (and bf16) products only come
// first where the CPU has them.
const KernelTable& best_available() {
  for (const char* name : {"avx512amx", "neondot"}) {
    if (const KernelTable* t = kernels_for_isa(name)) return *t;
  }
  for (const char* name : kIsaNames) {
    if (const KernelTable* t = kernels_for_isa(name)) return *t;
  }
  return scalar_kernels();
}

TEST(Dispatch, ChooseWithoutRequestGivesBest) {
  EXPECT_EQ(choose_kernels(nullptr).table, &best_available());
  EXPECT_EQ(choose_kernels("").table, &best_available());
  EXPECT_EQ(choose_kernels(nullptr).warning, "");
}

TEST(Dispatch, ChooseHonoursAvailableRequests) {
  for (const char* name : kIsaNames) {
    if (const KernelTable* t = kernels_for_isa(name)) {
      const KernelChoice choice = choose_kernels(name);
      EXPECT_EQ(choice.table, t);
      EXPECT_EQ(choice.warning, "") << name;
    }
  }
}

TEST(Dispatch, ChooseWarnsAndFallsBack) {
  const KernelChoice unknown = choose_kernels("avx9000");
  EXPECT_EQ(unknown.table, &best_available());
  EXPECT_NE(unknown.warning.find("AFT_ISA=avx9000 is unknown"), std::string::npos);
  for (const char* name : kIsaNames) {
    if (kernels_for_isa(name) != nullptr) continue;
    const KernelChoice fallback = choose_kernels(name);
    EXPECT_EQ(fallback.table, &best_available());
    EXPECT_NE(fallback.warning.find("not available"), std::string::npos) << name;
  }
}

TEST(Dispatch, ActiveKernelsFollowTheEnvironment) {
  EXPECT_EQ(&active_kernels(), choose_kernels(std::getenv("AFT_ISA")).table);
}

// active_kernels() reads AFT_ISA once and caches its choice: these run in a forked child, and
// GoogleTest runs *DeathTest suites before all others, so nothing has cached a table yet. (The
// default "fast" style forks without exec, which also works under user-mode emulation.)
TEST(DispatchDeathTest, AftIsaForcesTheTable) {
  EXPECT_EXIT(
      {
        setenv("AFT_ISA", "scalar", 1);
        std::exit(&active_kernels() == &scalar_kernels() ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        setenv("AFT_ISA", "no-such-isa", 1);
        const bool unknown = active_kernel_choice().warning.find(
                                 "AFT_ISA=no-such-isa is unknown") != std::string::npos;
        std::exit(&active_kernels() == &best_available() && unknown ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

// ---------------------------------------------------------------------------------------------
// The scalar reference against float64.

// One float rounding of a value computed in double: half an ulp, with room for the double sum.
constexpr double kReferenceTol = kUlp;

TEST(Reference, GemvMatchesFloat64) {
  const KernelTable& k = scalar_kernels();
  for (std::size_t rows : {1, 5, 17}) {
    for (std::size_t cols : kSizes) {
      const auto w = random_vector(rows * cols, -1.0f, 1.0f, 1);
      const auto x = random_vector(cols, -1.0f, 1.0f, 2);
      const auto bias = random_vector(rows, -1.0f, 1.0f, 3);
      auto y = guarded(rows);
      k.gemv_f32(rows, cols, packed_f32(rows, cols, w).data(), x.data(), bias.data(), y.data());
      expect_guard_intact(y, rows);
      for (std::size_t r = 0; r < rows; ++r) {
        double sum = bias[r], magnitude = std::fabs(bias[r]);
        for (std::size_t c = 0; c < cols; ++c) {
          sum += double(w[r * cols + c]) * x[c];
          magnitude += std::fabs(double(w[r * cols + c]) * x[c]);
        }
        // Rounding the result: relative to |sum|; the double sum: negligible against magnitude.
        EXPECT_LE(std::fabs(y[r] - sum), kReferenceTol * std::fabs(sum) + 1e-12 * magnitude)
            << rows << "x" << cols << " row " << r;
      }
    }
  }
}

// mean and biased variance in float64, the formula applied literally.
std::vector<double> layer_norm_f64(const std::vector<float>& x, const std::vector<float>& gamma,
                                   const std::vector<float>& beta, double eps) {
  const std::size_t n = x.size();
  double mean = 0.0, var = 0.0;
  for (float v : x) mean += v;
  mean /= n;
  for (float v : x) var += (v - mean) * (v - mean);
  var /= n;
  std::vector<double> y(n);
  for (std::size_t i = 0; i < n; ++i) {
    y[i] = (x[i] - mean) / std::sqrt(var + eps) * gamma[i] + beta[i];
  }
  return y;
}

// Inputs with a common offset large against their spread are where a careless float mean fails.
struct LayerNormCase {
  float offset;
  float spread;
};
constexpr LayerNormCase kLayerNormCases[] = {
    {0.0f, 1.0f}, {0.0f, 30.0f}, {1000.0f, 1.0f}, {-50.0f, 0.01f}};

TEST(Reference, LayerNormMatchesFloat64) {
  const KernelTable& k = scalar_kernels();
  for (const LayerNormCase& c : kLayerNormCases) {
    for (std::size_t n : kSizes) {
      if (n == 1) continue;  // a single value normalizes to beta; covered below
      auto x = random_vector(n, -c.spread, c.spread, 4);
      for (float& v : x) v += c.offset;
      const auto gamma = random_vector(n, 0.5f, 1.5f, 5);
      const auto beta = random_vector(n, -0.5f, 0.5f, 6);
      auto y = guarded(n);
      k.layer_norm_f32(n, x.data(), gamma.data(), beta.data(), 1e-5f, y.data());
      expect_guard_intact(y, n);
      const auto ref = layer_norm_f64(x, gamma, beta, double(1e-5f));  // the kernel's float eps
      for (std::size_t i = 0; i < n; ++i) {
        // The output's rounding; the slack covers double roundings of its terms when it cancels.
        const double terms = std::fabs(ref[i] - beta[i]) + std::fabs(beta[i]);
        expect_close(y[i], ref[i], std::fabs(ref[i]) + 1e-6 * terms, kReferenceTol,
                     "n=" + std::to_string(n) + " offset=" + std::to_string(c.offset));
      }
    }
  }
}

TEST(Reference, LayerNormOfConstantInputIsBeta) {
  const std::vector<float> x(33, 7.25f), gamma(33, 2.0f), beta = random_vector(33, -1, 1, 7);
  for (const char* name : kIsaNames) {
    const KernelTable* k = kernels_for_isa(name);
    if (k == nullptr) continue;
    for (std::size_t n : {1, 33}) {
      std::vector<float> y(n);
      k->layer_norm_f32(n, x.data(), gamma.data(), beta.data(), 1e-5f, y.data());
      for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(y[i], beta[i]) << name << " n=" << n;
    }
  }
}

TEST(Reference, AftOutputMatchesFloat64) {
  const KernelTable& k = scalar_kernels();
  std::vector<float> q = {0.0f,   1.0f,    -1.0f, 20.0f, -20.0f, 87.0f, -87.0f,
                          100.0f, -100.0f, 1e4f,  -1e4f, 1e30f,  -1e30f};
  const auto more = random_vector(200, -30.0f, 30.0f, 8);
  q.insert(q.end(), more.begin(), more.end());
  const std::size_t n = q.size();
  const auto a = as_doubles(random_vector(n, -5.0f, 5.0f, 9));
  const auto b = as_doubles(random_vector(n, 1.0f, 50.0f, 10));
  auto y = guarded(n);
  k.aft_output_f32(n, q.data(), a.data(), b.data(), y.data());
  expect_guard_intact(y, n);
  for (std::size_t c = 0; c < n; ++c) {
    const double ref = 1.0 / (1.0 + std::exp(-double(q[c]))) * a[c] / b[c];
    // In float32 from the narrowed sums: half an ulp each for a and b, the product e * a, 1 + e,
    // (1 + e) * b and the quotient, and expf's error: within 4 ulp.
    expect_close(y[c], ref, std::fabs(ref), 4 * kUlp, "q=" + std::to_string(q[c]), kFloatMin);
  }
}

TEST(Reference, GeluMatchesFloat64) {
  const KernelTable& k = scalar_kernels();
  std::vector<float> x = {0.0f,  1e-30f, -1e-30f, 1.0f,  -1.0f, 5.0f,
                          -5.0f, 9.0f,   -9.0f,   13.0f, 40.0f};
  const auto more = random_vector(300, -10.0f, 10.0f, 11);
  x.insert(x.end(), more.begin(), more.end());
  auto y = x;
  y.resize(x.size() + 16, kGuard);
  k.gelu_f32(x.size(), y.data());
  expect_guard_intact(y, x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double ref = 0.5 * v * std::erfc(-v / std::sqrt(2.0));
    // erfc(z) has condition number ~2 z^2 for large z: the float z = -x / sqrt 2 (a rounded
    // constant and a rounded product, ~0.65 ulp) becomes ~0.65 x^2 ulp of the result (measured up
    // to 0.6 x^2 at x = -11); plus the roundings of erfcf and the products.
    const double tol = (4.0 + v * v) * kUlp;
    expect_close(y[i], ref, std::fabs(ref), tol, "x=" + std::to_string(v), kFloatMin);
  }
}

TEST(Reference, ReluSquaredIsExact) {
  const KernelTable& k = scalar_kernels();
  auto x = random_vector(100, -3.0f, 3.0f, 14);
  x[0] = 0.0f, x[1] = -0.0f, x[2] = 1e-30f, x[3] = 1e30f;  // 1e-30: underflows to 0; 1e30: inf
  auto y = x;
  k.relu_squared_f32(y.size(), y.data());
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i] > 0 ? x[i] * x[i] : 0.0f);
}

TEST(Reference, GatedAddMatchesFloat64) {
  const KernelTable& k = scalar_kernels();
  std::vector<float> g = {0.0f, 1.0f, -1.0f, 20.0f, -20.0f, 87.0f, -87.0f, 1e4f, -1e4f, -1e30f};
  const auto more = random_vector(200, -30.0f, 30.0f, 15);
  g.insert(g.end(), more.begin(), more.end());
  const std::size_t n = g.size();
  const auto x = random_vector(n, -5.0f, 5.0f, 16);
  const auto y0 = random_vector(n, -5.0f, 5.0f, 17);
  auto y = y0;
  y.resize(n + 16, kGuard);
  k.gated_add_f32(n, g.data(), x.data(), y.data());
  expect_guard_intact(y, n);
  for (std::size_t c = 0; c < n; ++c) {
    const double ref = y0[c] + x[c] / (1.0 + std::exp(-double(g[c])));
    // One rounding to float of a float64 result: half an ulp of the larger of the terms.
    expect_close(y[c], ref, std::max(std::fabs(ref), double(std::fabs(x[c]))), kUlp,
                 "g=" + std::to_string(g[c]), kFloatMin);
  }
}

TEST(Reference, ReluAndAddAreExact) {
  const KernelTable& k = scalar_kernels();
  const auto x = random_vector(100, -3.0f, 3.0f, 12);
  auto y = x;
  k.relu_f32(y.size(), y.data());
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i] > 0 ? x[i] : 0.0f);
  const auto z = random_vector(100, -3.0f, 3.0f, 13);
  auto sum = z;
  k.add_f32(sum.size(), x.data(), sum.data());
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(sum[i], float(double(x[i]) + z[i]));
}

TEST(Reference, SumMatchesFloat64) {
  const KernelTable& k = scalar_kernels();
  for (std::size_t n : kSizes) {
    const auto x = random_vector(n, -1.0f, 1.0f, 14 + n);
    double sum = 0.0, magnitude = 0.0;
    for (float v : x) sum += v, magnitude += std::fabs(v);
    EXPECT_LE(std::fabs(k.sum_f32(n, x.data()) - sum),
              kReferenceTol * std::fabs(sum) + 1e-12 * magnitude)
        << "n=" << n;
  }
  EXPECT_EQ(k.sum_f32(0, nullptr), 0.0f);
}

// ---------------------------------------------------------------------------------------------
// The AFT accumulator, every table against a float64 softmax-weighted average.

struct AftStream {
  std::size_t channels;
  std::size_t steps;
  std::vector<float> k;   // steps x channels
  std::vector<float> v;   // steps x channels
  std::vector<float> w;   // steps: the bias shared by all channels
  std::vector<float> wc;  // steps x channels: per-channel biases
};

// Keys and biases mixing magnitudes around +-80 and +-200 (exp overflows float beyond 88), plus
// noise, so that the running maximum both jumps and creeps.
AftStream make_stream(std::size_t channels, std::size_t steps, unsigned seed) {
  std::mt19937 rng(seed);
  const float centres[] = {-200.0f, -80.0f, 0.0f, 80.0f, 200.0f};
  std::uniform_int_distribution<int> pick(0, 4);
  std::uniform_real_distribution<float> noise(-5.0f, 5.0f), value(-1.0f, 1.0f);
  AftStream s{channels, steps, {}, {}, {}, {}};
  for (std::size_t i = 0; i < steps * channels; ++i) {
    s.k.push_back(centres[pick(rng)] + noise(rng));
    s.v.push_back(value(rng));
    s.wc.push_back(centres[pick(rng)] + noise(rng));
  }
  for (std::size_t t = 0; t < steps; ++t) s.w.push_back(centres[pick(rng)] + noise(rng));
  return s;
}

struct AftState {
  std::vector<double> m, a, b;
  explicit AftState(std::size_t n) : m(n + 16, -kInf), a(n + 16, 0.0), b(n + 16, 0.0) {}
};

void run_stream(const KernelTable& k, const AftStream& s, bool per_channel, AftState& state) {
  const std::size_t n = s.channels;
  for (std::size_t t = 0; t < s.steps; ++t) {
    if (per_channel) {
      k.aft_accumulate_biased_f32(n, state.m.data(), state.a.data(), state.b.data(), &s.k[t * n],
                                  &s.v[t * n], &s.wc[t * n]);
    } else {
      k.aft_accumulate_f32(n, state.m.data(), state.a.data(), state.b.data(), &s.k[t * n],
                           &s.v[t * n], s.w[t]);
    }
  }
}

// Per channel: the softmax-weighted average of v over the logits k + w (summed in float64, as the
// kernel sums them), its maximum logit, and the average of |v| under the same weights (the scale
// that errors of a cancelling sum are relative to).
struct AftExpected {
  std::vector<double> average, max_logit, magnitude;
};

AftExpected softmax_average(const AftStream& s, bool per_channel) {
  const std::size_t n = s.channels;
  AftExpected e{std::vector<double>(n), std::vector<double>(n), std::vector<double>(n)};
  for (std::size_t c = 0; c < n; ++c) {
    std::vector<double> logits(s.steps);
    for (std::size_t t = 0; t < s.steps; ++t) {
      logits[t] = double(s.k[t * n + c]) + (per_channel ? s.wc[t * n + c] : s.w[t]);
    }
    const double top = *std::max_element(logits.begin(), logits.end());
    double num = 0.0, den = 0.0, mag = 0.0;
    for (std::size_t t = 0; t < s.steps; ++t) {
      const double weight = std::exp(logits[t] - top);
      num += weight * s.v[t * n + c];
      mag += weight * std::fabs(s.v[t * n + c]);
      den += weight;
    }
    e.average[c] = num / den;
    e.max_logit[c] = top;
    e.magnitude[c] = mag / den;
  }
  return e;
}

class IsaTest : public IsaTableTest {};

// Each of the 1000 steps rounds the float64 sums (and, when the maximum moves, the rescale, whose
// exp is good to ~1.5 ulp): at most steps * a few ulp (2^-52), under 1e-12.
constexpr double kStreamTol = 1e-12;

TEST_P(IsaTest, AftAccumulatorMatchesSoftmaxAverage) {
  for (bool per_channel : {false, true}) {
    for (std::size_t n : {1, 7, 16, 37}) {
      const AftStream s = make_stream(n, 1000, 20 + n);
      AftState state(n);
      run_stream(k(), s, per_channel, state);
      const AftExpected e = softmax_average(s, per_channel);
      for (std::size_t c = 0; c < n; ++c) {
        const std::string where = std::string(per_channel ? "biased" : "shared bias") +
                                  " n=" + std::to_string(n) + " c=" + std::to_string(c);
        ASSERT_TRUE(std::isfinite(state.a[c]) && std::isfinite(state.b[c])) << where;
        EXPECT_EQ(state.m[c], e.max_logit[c]) << where;
        EXPECT_GE(state.b[c], 1.0) << where;  // the entry at the maximum contributes exp(0)
        expect_close(state.a[c] / state.b[c], e.average[c], e.magnitude[c], kStreamTol, where);
      }
      for (std::size_t c = n; c < n + 16; ++c) {
        ASSERT_EQ(state.m[c], -kInf) << "wrote past n=" << n;
        ASSERT_EQ(state.a[c], 0.0) << "wrote past n=" << n;
      }
    }
  }
}

TEST_P(IsaTest, AftAccumulatorMatchesReference) {
  for (std::size_t n : kSizes) {
    const AftStream s = make_stream(n, 50, 40 + n);
    for (bool per_channel : {false, true}) {
      AftState got(n), want(n);
      run_stream(k(), s, per_channel, got);
      run_stream(ref(), s, per_channel, want);
      for (std::size_t c = 0; c < n; ++c) {
        const std::string where = "n=" + std::to_string(n) + " c=" + std::to_string(c);
        EXPECT_EQ(got.m[c], want.m[c]) << where;  // a max of the same float64 sums
        // 50 steps of a few float64 ulp each (exp 1.5 ulp, FMA vs separate rounding).
        expect_close(got.b[c], want.b[c], want.b[c], 1e-13, where);
        expect_close(got.a[c], want.a[c], want.b[c], 1e-13, where);  // |a| <= b max|v|, |v| <= 1
      }
    }
  }
}

TEST_P(IsaTest, AftAccumulatorFirstEntryAndExtremeLogits) {
  const std::size_t n = 19;
  AftState state(n);
  std::vector<float> key(n), value(n);
  for (std::size_t c = 0; c < n; ++c) {
    key[c] = (c % 2 ? 1.0f : -1.0f) * std::ldexp(1.0f, int(c * 7));  // +-1 up to +-2^126
    value[c] = float(c) - 9.0f;
  }
  k().aft_accumulate_f32(n, state.m.data(), state.a.data(), state.b.data(), key.data(),
                         value.data(), 0.0f);
  for (std::size_t c = 0; c < n; ++c) {  // from the empty state: a = v, b = 1, m = logit exactly
    EXPECT_EQ(state.m[c], key[c]);
    EXPECT_EQ(state.a[c], value[c]);
    EXPECT_EQ(state.b[c], 1.0f);
  }
  // Then logits of the other sign, up to the largest finite magnitudes (half the float maximum in
  // key and bias): exp(m - x) underflows to 0; nothing may become inf or NaN.
  const float half = std::numeric_limits<float>::max() / 2.0f;
  for (float bias : {0.0f, half, -half, 200.0f, -200.0f, 80.0f}) {
    for (std::size_t c = 0; c < n; ++c) key[c] = c % 3 ? -key[c] : (c % 2 ? half : -half);
    k().aft_accumulate_f32(n, state.m.data(), state.a.data(), state.b.data(), key.data(),
                           value.data(), bias);
    for (std::size_t c = 0; c < n; ++c) {
      ASSERT_TRUE(std::isfinite(state.m[c]) && std::isfinite(state.a[c]) &&
                  std::isfinite(state.b[c]))
          << "c=" << c << " bias=" << bias;
      EXPECT_GE(state.b[c], 1.0);
    }
  }
}

// 2^27 positions into one state, against sums known exactly in closed form. Lane 0: keys drawn at
// random from 8 (each with its value): the sums follow from how often each was drawn. Lane 1: keys
// rising by 2^-22 every 8 positions, each rise a new maximum (2^24 rescales, each by exp(-2^-22)),
// values 1 in the first half and 0 after: geometric series. With float32 sums (state format 2)
// both failed: b passed 2^24 and every later term was rounded away, and the rescales compounded
// their rounding (measured with the float32 scalar kernel: lane 0's a / b off by 0.83 of the
// average |v| and b by 0.53; lane 1's a / b by 0.18 and b by 0.49). Two lanes: the steps are
// sequential, a wider call costs more without going faster. 2^20 positions in slow runs
// (long_run.h).
TEST_P(IsaTest, AftAccumulatorStaysExactOverLongRuns) {
  const std::size_t positions = std::size_t{1} << (test_data::slow_test_run() ? 20 : 27);
  constexpr std::size_t kGroup = 8;
  const double groups = double(positions / kGroup);
  const double rise = 4.0 / groups;  // a power of two: every key g * rise, g < 2^24, is exact
  const float keys[8] = {-3.0f, -1.5f, -0.25f, 0.0f, 0.5f, 1.0f, 2.0f, 2.5f};
  const float values[8] = {0.9f, -0.7f, 0.3f, -0.2f, 0.8f, -0.5f, 0.1f, -0.4f};
  std::size_t drawn[8] = {};
  uint64_t rng = 1;
  AftState state(2);
  float key[2], value[2];
  for (std::size_t t = 0; t < positions; ++t) {
    rng = rng * 6364136223846793005u + 1442695040888963407u;
    const std::size_t j = rng >> 61;
    ++drawn[j];
    key[0] = keys[j];
    value[0] = values[j];
    key[1] = static_cast<float>(double(t / kGroup) * rise);
    value[1] = t < positions / 2 ? 1.0f : 0.0f;
    k().aft_accumulate_f32(2, state.m.data(), state.a.data(), state.b.data(), key, value, 0.0f);
  }
  double a = 0.0, b = 0.0, magnitude = 0.0;
  for (std::size_t j = 0; j < 8; ++j) {
    const double weight = drawn[j] * std::exp(double(keys[j]) - 2.5);
    a += weight * values[j];
    b += weight;
    magnitude += weight * std::fabs(values[j]);
  }
  EXPECT_EQ(state.m[0], 2.5);
  expect_close(state.b[0], b, b, 1e-6, "random keys: b");
  expect_close(state.a[0] / state.b[0], a / b, magnitude / b, 1e-6, "random keys: a / b");
  // Groups g < G with key g d, m = (G - 1) d:
  // b = 8 sum_g e^((g - G + 1) d) = 8 (1 - e^-Gd) / (1 - e^-d),
  // a = 8 sum_{g < G/2} e^((g - G + 1) d) = 8 e^(-(G - 1) d) (e^(G d / 2) - 1) / (e^d - 1).
  const double rising_b = kGroup * std::expm1(-groups * rise) / std::expm1(-rise);
  const double rising_a =
      kGroup * std::exp(-(groups - 1) * rise) * std::expm1(groups * rise / 2) / std::expm1(rise);
  EXPECT_EQ(state.m[1], (groups - 1) * rise);
  expect_close(state.b[1], rising_b, rising_b, 1e-6, "rising keys: b");
  expect_close(state.a[1] / state.b[1], rising_a / rising_b, rising_a / rising_b, 1e-6,
               "rising keys: a / b");
}

TEST_P(IsaTest, GemvMatchesReference) {
  // Rows: lane groups of 4, 8 and 16 with every kind of leftover.
  for (std::size_t rows : {1, 2, 3, 4, 5, 7, 8, 9, 17, 36, 53}) {
    for (std::size_t cols : kSizes) {
      const auto w = random_vector(rows * cols, -1.0f, 1.0f, 50);
      const auto packed = packed_f32(rows, cols, w);
      const auto x = random_vector(cols, -1.0f, 1.0f, 51);
      const auto bias = random_vector(rows, -1.0f, 1.0f, 52);
      for (const float* b : {bias.data(), static_cast<const float*>(nullptr)}) {
        auto y = guarded(rows), want = guarded(rows);
        k().gemv_f32(rows, cols, packed.data(), x.data(), b, y.data());
        ref().gemv_f32(rows, cols, packed.data(), x.data(), b, want.data());
        expect_guard_intact(y, rows);
        for (std::size_t r = 0; r < rows; ++r) {
          double magnitude = b ? std::fabs(b[r]) : 0.0;
          for (std::size_t c = 0; c < cols; ++c) magnitude += std::fabs(w[r * cols + c] * x[c]);
          // One float chain of cols roundings per row: worst case 1000 ulp = 6e-5 of the sum of
          // magnitudes; errors of random sign make that sqrt-like (measured < 2e-6): 1e-5.
          expect_close(y[r], want[r], magnitude, 1e-5,
                       std::to_string(rows) + "x" + std::to_string(cols) + " row " +
                           std::to_string(r) + (b ? " bias" : ""));
          // With FMA every SIMD table sums a row in the same order: column after column, one fma
          // each, then the bias. SSE2 has no FMA (a product, then a sum); the reference sums in
          // float64.
          if (std::string(k().isa) == "sse2" || std::string(k().isa) == "scalar") continue;
          float chain = 0.0f;
          for (std::size_t c = 0; c < cols; ++c) chain = std::fma(w[r * cols + c], x[c], chain);
          ASSERT_EQ(y[r], b ? chain + b[r] : chain)
              << k().isa << " " << rows << "x" << cols << " row " << r << (b ? " bias" : "");
        }
      }
    }
  }
}

// A batch of sequences must decode as each would alone: every vector's result has gemv_f32's bits.
// Shapes: groups of 16 rows with leftovers and passes of 2 groups, odd vector counts (blocks of 8,
// 6 or 2 plus the rest), strides wider than the data.
TEST_P(IsaTest, GemvBatchHasTheBitsOfGemv) {
  for (std::size_t rows : {1, 3, 4, 5, 17, 100}) {
    for (std::size_t cols : {1, 7, 16, 33, 40, 257, 2048}) {
      for (std::size_t vectors : {1, 2, 3, 5, 13, 16}) {
        const std::size_t x_stride = cols + 3, y_stride = rows + 5;
        const auto w = packed_f32(rows, cols, random_vector(rows * cols, -1.0f, 1.0f, 53));
        const auto x = random_vector(vectors * x_stride, -1.0f, 1.0f, 54);
        const auto bias = random_vector(rows, -1.0f, 1.0f, 55);
        for (const float* b : {bias.data(), static_cast<const float*>(nullptr)}) {
          auto y = guarded(vectors * y_stride);
          k().gemv_batch_f32(rows, cols, w.data(), vectors, x.data(), x_stride, b, y.data(),
                             y_stride);
          expect_guard_intact(y, vectors * y_stride);
          for (std::size_t v = 0; v < vectors; ++v) {
            std::vector<float> alone(rows);
            k().gemv_f32(rows, cols, w.data(), x.data() + v * x_stride, b, alone.data());
            for (std::size_t r = 0; r < rows; ++r) {
              ASSERT_EQ(y[v * y_stride + r], alone[r])
                  << rows << "x" << cols << ", vector " << v << " of " << vectors << ", row " << r
                  << (b ? ", bias" : "");
            }
          }
        }
      }
    }
  }
}

// Growing prefixes of one packing (the AFT-full prefill's row blocks) have the bits of the same
// columns packed alone: rows of 2 groups and leftovers, prefixes of one column, of a few and of
// all.
TEST_P(IsaTest, GemvBatchPrefixHasTheBitsOfItsColumnsPackedAlone) {
  for (std::size_t rows : {16, 37, 64, 128}) {
    for (std::size_t packed_cols : {1, 40, 512}) {
      const auto full = random_vector(rows * packed_cols, -1.0f, 1.0f, 56);
      const auto w = packed_f32(rows, packed_cols, full);
      for (std::size_t cols : {std::size_t{1}, packed_cols / 3 + 1, packed_cols}) {
        std::vector<float> leading(rows * cols);
        for (std::size_t r = 0; r < rows; ++r) {
          std::copy_n(full.begin() + r * packed_cols, cols, leading.begin() + r * cols);
        }
        const auto alone = packed_f32(rows, cols, leading);
        const std::size_t vectors = 11, x_stride = packed_cols + 1, y_stride = rows + 2;
        const auto x = random_vector(vectors * x_stride, -1.0f, 1.0f, 57);
        auto y = guarded(vectors * y_stride), want = guarded(vectors * y_stride);
        k().gemv_batch_f32_prefix(rows, cols, packed_cols, w.data(), vectors, x.data(), x_stride,
                                  nullptr, y.data(), y_stride);
        k().gemv_batch_f32(rows, cols, alone.data(), vectors, x.data(), x_stride, nullptr,
                           want.data(), y_stride);
        expect_guard_intact(y, vectors * y_stride);
        for (std::size_t v = 0; v < vectors; ++v) {
          for (std::size_t r = 0; r < rows; ++r) {
            ASSERT_EQ(y[v * y_stride + r], want[v * y_stride + r])
                << rows << "x" << cols << " of " << packed_cols << ", vector " << v << ", row "
                << r;
          }
        }
      }
    }
  }
}

TEST_P(IsaTest, LayerNormMatchesReference) {
  for (const LayerNormCase& c : kLayerNormCases) {
    for (std::size_t n : kSizes) {
      auto x = random_vector(n, -c.spread, c.spread, 60 + n);
      for (float& v : x) v += c.offset;
      const auto gamma = random_vector(n, -1.5f, 1.5f, 61);
      const auto beta = random_vector(n, -0.5f, 0.5f, 62);
      auto y = guarded(n), want = guarded(n);
      k().layer_norm_f32(n, x.data(), gamma.data(), beta.data(), 1e-5f, y.data());
      ref().layer_norm_f32(n, x.data(), gamma.data(), beta.data(), 1e-5f, want.data());
      expect_guard_intact(y, n);
      // Errors of mean and variance are relative to the spread (the kernel sums x - x[0]):
      // chains of <= n / (2 lanes) float additions, ~1e-6 measured; the normalized value
      // carries them times |gamma|, on top of ulp-level roundings of the output.
      for (std::size_t i = 0; i < n; ++i) {
        const double normalized = (want[i] - beta[i]) / gamma[i];
        const double scale =
            std::fabs(gamma[i]) * (1.0 + std::fabs(normalized)) + std::fabs(beta[i]);
        expect_close(y[i], want[i], scale, 1e-5,
                     "n=" + std::to_string(n) + " offset=" + std::to_string(c.offset));
      }
    }
  }
}

TEST_P(IsaTest, AftOutputMatchesReference) {
  for (std::size_t n : kSizes) {
    auto q = random_vector(n, -40.0f, 40.0f, 70 + n);
    if (n > 4) q[1] = 1e4f, q[2] = -1e4f, q[3] = -100.0f, q[4] = 0.0f;
    const auto a = as_doubles(random_vector(n, -5.0f, 5.0f, 71));
    const auto b = as_doubles(random_vector(n, 1.0f, 50.0f, 72));
    auto y = guarded(n), want = guarded(n);
    k().aft_output_f32(n, q.data(), a.data(), b.data(), y.data());
    ref().aft_output_f32(n, q.data(), a.data(), b.data(), want.data());
    expect_guard_intact(y, n);
    for (std::size_t c = 0; c < n; ++c) {
      // The reference within 4 ulp of the exact value (Reference.AftOutputMatchesFloat64), the
      // SIMD read-out within 5 (its exp within 2 ulp, expf's within 1): at most 9 apart.
      expect_close(y[c], want[c], std::fabs(want[c]), 9 * kUlp, "q=" + std::to_string(q[c]),
                   kFloatMin);
    }
  }
}

TEST_P(IsaTest, GeluMatchesReference) {
  for (std::size_t n : kSizes) {
    auto x = random_vector(n, -10.0f, 10.0f, 80 + n);
    if (n > 3) x[0] = 0.0f, x[1] = 13.0f, x[2] = -13.0f, x[3] = 1e-20f;
    auto y = x, want = x;
    y.resize(n + 16, kGuard);
    k().gelu_f32(n, y.data());
    ref().gelu_f32(n, want.data());
    expect_guard_intact(y, n);
    for (std::size_t i = 0; i < n; ++i) {
      // The same float argument -x / sqrt 2 on both sides, so only xsimd's erfc and erfcf differ:
      // measured within 2.1e-6 of each other down to x = -13 (deep in erfc's tail).
      expect_close(y[i], want[i], std::fabs(want[i]), 1e-5, "x=" + std::to_string(x[i]), kFloatMin);
    }
  }
}

TEST_P(IsaTest, ReluAndAddMatchReferenceExactly) {
  for (std::size_t n : kSizes) {
    const auto x = random_vector(n, -2.0f, 2.0f, 90 + n);
    auto y = x, want = x;
    y.resize(n + 16, kGuard);
    k().relu_f32(n, y.data());
    ref().relu_f32(n, want.data());
    expect_guard_intact(y, n);
    for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(y[i], want[i]) << "relu n=" << n;

    const auto z = random_vector(n, -2.0f, 2.0f, 91 + n);
    auto sum = z, want_sum = z;
    sum.resize(n + 16, kGuard);
    k().add_f32(n, x.data(), sum.data());
    ref().add_f32(n, x.data(), want_sum.data());
    expect_guard_intact(sum, n);
    for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(sum[i], want_sum[i]) << "add n=" << n;
  }
}

TEST_P(IsaTest, ReluSquaredMatchesReferenceExactly) {
  for (std::size_t n : kSizes) {
    auto x = random_vector(n, -2.0f, 2.0f, 92 + n);
    if (n > 2) x[0] = 0.0f, x[1] = 1e30f, x[2] = -1e30f;
    auto y = x, want = x;
    y.resize(n + 16, kGuard);
    k().relu_squared_f32(n, y.data());
    ref().relu_squared_f32(n, want.data());
    expect_guard_intact(y, n);
    for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(y[i], want[i]) << "n=" << n << " i=" << i;
  }
}

TEST_P(IsaTest, GatedAddMatchesReference) {
  for (std::size_t n : kSizes) {
    auto g = random_vector(n, -40.0f, 40.0f, 93 + n);
    if (n > 4) g[1] = 1e4f, g[2] = -1e4f, g[3] = -100.0f, g[4] = 0.0f;
    const auto x = random_vector(n, -5.0f, 5.0f, 94 + n);
    const auto y0 = random_vector(n, -5.0f, 5.0f, 95 + n);
    auto y = y0, want = y0;
    y.resize(n + 16, kGuard);
    k().gated_add_f32(n, g.data(), x.data(), y.data());
    ref().gated_add_f32(n, g.data(), x.data(), want.data());
    expect_guard_intact(y, n);
    for (std::size_t c = 0; c < n; ++c) {
      // Both within a few float64 ulp of the exact value, then rounded to float once.
      expect_close(y[c], want[c], std::max(std::fabs(want[c]), std::fabs(x[c])), kUlp,
                   "g=" + std::to_string(g[c]), kFloatMin);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Machine probes (aft-bench).

TEST_P(IsaTest, SumMatchesReference) {
  std::vector<std::size_t> sizes = kSizes;
  sizes.insert(sizes.end(), {0, 63, 65, 4096, 100003});
  for (std::size_t n : sizes) {
    const auto x = random_vector(n, -1.0f, 1.0f, 100 + n);  // exactly n floats: ASan sees overreads
    double magnitude = 0.0;
    for (float v : x) magnitude += std::fabs(v);
    // Any order: each partial sum is at most the magnitude, and a chain of n additions rounds at
    // most n times (a loose bound: the kernel's chains are n / lanes long).
    expect_close(k().sum_f32(n, x.data()), ref().sum_f32(n, x.data()), magnitude,
                 (double(n) + 2.0) * kUlp, "n=" + std::to_string(n));
  }
}

TEST_P(IsaTest, SumOfSmallIntegersIsExact) {
  for (std::size_t n : kSizes) {
    std::vector<float> x(n);
    double sum = 0.0;
    for (std::size_t i = 0; i < n; ++i) sum += x[i] = float(int(i % 7) - 2);
    EXPECT_EQ(k().sum_f32(n, x.data()), float(sum)) << "n=" << n;  // every partial sum is exact
  }
}

// Chain c of the FMA probe after `iterations` steps (kernels.h), fused or as a product then a sum.
float fma_chain(std::size_t c, std::size_t iterations, bool fused) {
  float x = 1.0f + static_cast<float>(c + 1) / 1024.0f;
  for (std::size_t i = 0; i < iterations; ++i) {
    if (fused) {
      x = std::fma(x, kFmaProbeMultiplier, kFmaProbeAddend);
    } else {
      const volatile float product = x * kFmaProbeMultiplier;  // rounded on its own
      x = product + kFmaProbeAddend;
    }
  }
  return x;
}

TEST(FmaProbe, FusedAndUnfusedChainsDiffer) {  // so the exact comparisons below tell them apart
  int differ = 0;
  for (std::size_t c = 0; c < 16; ++c)
    differ += fma_chain(c, 1000, true) != fma_chain(c, 1000, false);
  EXPECT_GT(differ, 0);
}

// sse2 has no FMA instruction. xsimd 8.1 has no fma kernel for avx512f (whose probe the avx512vnni
// table shares): its xsimd::fma is x * y + z, which the compiler contracts to one instruction in
// optimized builds (-ffp-contract=fast, GCC's default) but not always at -O1 (the Sanitize build):
// either is correct there.
enum class Fusion { Fused, Unfused, Either };
Fusion expected_fusion(const std::string& isa) {
  if (isa == "sse2") return Fusion::Unfused;
  return isa.rfind("avx512", 0) == 0 ? Fusion::Either : Fusion::Fused;
}

TEST_P(IsaTest, FmaProbeFollowsTheDefinition) {
  const Fusion fusion = expected_fusion(GetParam());
  std::vector<float> sink(kFmaProbeMaxChains + 16, kGuard);
  const std::size_t chains = k().fma_probe_f32(1, sink.data()) / 2;
  ASSERT_GE(chains, 1u);
  ASSERT_LE(chains, kFmaProbeMaxChains);
  for (std::size_t iterations : {0, 1, 2, 3, 17, 1000}) {
    std::fill(sink.begin(), sink.end(), kGuard);
    EXPECT_EQ(k().fma_probe_f32(iterations, sink.data()), 2 * chains * iterations);
    for (std::size_t c = 0; c < chains; ++c) {
      // Correctly rounded operations: bit-identical to the scalar recurrence.
      const float fused = fma_chain(c, iterations, true), unfused = fma_chain(c, iterations, false);
      const bool ok = fusion == Fusion::Fused     ? sink[c] == fused
                      : fusion == Fusion::Unfused ? sink[c] == unfused
                                                  : sink[c] == fused || sink[c] == unfused;
      ASSERT_TRUE(ok) << "chain " << c << ", " << iterations << " iterations: " << sink[c]
                      << ", fused " << fused << ", unfused " << unfused;
    }
    expect_guard_intact(sink, chains);
  }
}

// ---------------------------------------------------------------------------------------------
// AFT window in a frame (push / reframe / sums / output), as the mixer runs it.

// A sliding window of `window` entries over `steps` tokens: entries leaving it join the global
// sums (bias 0), the window is read in its frame, and the output is compared with a float64
// softmax average over every entry so far. Keys drift by +-40 in phases so that the frame is
// rescaled on new maxima and goes stale when the maximum leaves.
void check_window_stream(const KernelTable& k, std::size_t n, bool per_channel, float spread,
                         const std::string& name) {
  constexpr std::size_t window = 8, steps = 70;
  std::mt19937 rng(static_cast<unsigned>(n * 31 + window));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> keys(steps * n), values(steps * n), scaled(window * n), frame(n, -kInf);
  std::vector<float> q(n), y(n), sa(n), sb(n), bias_max(n), e(window);
  std::vector<float> bias(window * n);  // per distance (per channel, or one value per row)
  for (std::size_t i = 0; i < bias.size(); ++i) {
    bias[i] =
        per_channel ? spread * unit(rng) : bias[i - i % n] + (i % n ? 0.0f : spread * unit(rng));
  }
  std::vector<float> bias_exp(bias.size());
  for (std::size_t c = 0; c < n; ++c) {
    float top = -kInf;
    for (std::size_t dist = 0; dist < window; ++dist) top = std::max(top, bias[dist * n + c]);
    bias_max[c] = top;
    for (std::size_t dist = 0; dist < window; ++dist) {
      bias_exp[dist * n + c] = std::exp(bias[dist * n + c] - top);
    }
  }
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const float phase = (i / n / 20) % 2 ? -40.0f : 40.0f;
    keys[i] = phase + spread * unit(rng);
    values[i] = unit(rng);
  }
  AftState global(n);
  for (std::size_t t = 0; t < steps; ++t) {
    if (t >= window) {
      k.aft_accumulate_f32(n, global.m.data(), global.a.data(), global.b.data(),
                           &keys[(t - window) * n], &values[(t - window) * n], 0.0f);
    }
    const std::size_t first = t + 1 >= window ? t + 1 - window : 0, entries = t - first + 1;
    std::vector<const float*> key_rows, value_rows, e_rows;
    std::vector<float*> scaled_rows;
    for (std::size_t j = 0; j < entries; ++j) {
      key_rows.push_back(&keys[(first + j) * n]);
      value_rows.push_back(&values[(first + j) * n]);
      scaled_rows.push_back(&scaled[(first + j) % window * n]);
      e_rows.push_back(&bias_exp[(t - first - j) * n]);
      e[j] = e_rows.back()[0];
    }
    k.aft_window_push_f32(n, entries - 1, scaled_rows.data(), frame.data(), key_rows.back(),
                          scaled_rows.back());
    for (std::size_t c = 0; c < n; ++c) q[c] = unit(rng) * 4.0f;
    auto sums = [&] {
      return per_channel
                 ? k.aft_window_sums_biased_f32(n, entries, e_rows.data(), scaled_rows.data(),
                                                value_rows.data(), sa.data(), sb.data())
                 : k.aft_window_sums_f32(n, entries, e.data(), scaled_rows.data(),
                                         value_rows.data(), sa.data(), sb.data());
    };
    if (!sums()) {
      k.aft_window_reframe_f32(n, entries, key_rows.data(), scaled_rows.data(), frame.data());
      ASSERT_TRUE(sums()) << name << " t=" << t << ": a fresh frame must be stable";
    }
    k.aft_window_output_f32(n, q.data(), global.m.data(), global.a.data(), global.b.data(),
                            frame.data(), bias_max.data(), sa.data(), sb.data(), y.data());
    for (std::size_t c = 0; c < n; ++c) {
      double top = -1e300, num = 0.0, den = 0.0, mag = 0.0;
      auto logit = [&](std::size_t tp) {
        return tp < first ? double(keys[tp * n + c])
                          : double(keys[tp * n + c]) + bias[(t - tp) * n + c];
      };
      for (std::size_t tp = 0; tp <= t; ++tp) top = std::max(top, logit(tp));
      for (std::size_t tp = 0; tp <= t; ++tp) {
        const double weight = std::exp(logit(tp) - top);
        num += weight * values[tp * n + c];
        mag += weight * std::fabs(values[tp * n + c]);
        den += weight;
      }
      const double gate = 1.0 / (1.0 + std::exp(-double(q[c])));
      expect_close(y[c], gate * num / den, gate * mag / den, 2e-5,
                   name + " t=" + std::to_string(t) + " c=" + std::to_string(c));
    }
  }
}

TEST_P(IsaTest, AftWindowMatchesSoftmaxAverage) {
  for (std::size_t n : {1, 7, 16, 37, 64}) {
    for (bool per_channel : {false, true}) {
      for (float spread : {3.0f, 30.0f}) {
        check_window_stream(k(), n, per_channel, spread,
                            std::string(per_channel ? "biased" : "shared") +
                                " n=" + std::to_string(n) + " spread=" + std::to_string(spread));
      }
    }
  }
}

// A raising key takes the reference kAftWindowHeadroom above itself, so that keys up to there
// enter later without a pass over the window: those leave the older entries bit for bit.
TEST_P(IsaTest, AftWindowRaiseLeavesHeadroom) {
  for (std::size_t n : kSizes) {
    constexpr std::size_t entries = 4;
    const auto keys = random_vector(entries * n, -2.0f, 2.0f, 70 + n);
    std::vector<const float*> key_rows;
    std::vector<float> u(entries * n + 2 * n), r(n);
    std::vector<float*> u_rows;
    for (std::size_t j = 0; j < entries; ++j) {
      key_rows.push_back(&keys[j * n]);
      u_rows.push_back(&u[j * n]);
    }
    u_rows.push_back(&u[entries * n]);
    u_rows.push_back(&u[(entries + 1) * n]);
    k().aft_window_reframe_f32(n, entries, key_rows.data(), u_rows.data(), r.data());
    const std::vector<float> old_u(u.begin(), u.begin() + entries * n), old_r = r;
    const std::string where = "n=" + std::to_string(n);
    // Even channels: a key 1 above the frame raises it; odd channels: 1 below, no change. The
    // rescaled u are an exp and a product in float: within 8 ulp.
    std::vector<float> raising(n), within(n);
    for (std::size_t c = 0; c < n; ++c) raising[c] = old_r[c] + (c % 2 ? -1.0f : 1.0f);
    k().aft_window_push_f32(n, entries, u_rows.data(), r.data(), raising.data(), u_rows[entries]);
    for (std::size_t c = 0; c < n; ++c) {
      const bool raised = c % 2 == 0;
      ASSERT_EQ(r[c], raised ? raising[c] + kAftWindowHeadroom : old_r[c]) << where << " c=" << c;
      const double scale = raised ? std::exp(double(old_r[c]) - r[c]) : 1.0;
      for (std::size_t j = 0; j < entries; ++j) {
        if (raised) {
          expect_close(u[j * n + c], old_u[j * n + c] * scale, old_u[j * n + c] * scale, 8 * kUlp,
                       where + " rescaled u");
        } else {
          ASSERT_EQ(u[j * n + c], old_u[j * n + c]) << where << " c=" << c;
        }
      }
      expect_close(u[entries * n + c], std::exp(double(raising[c]) - r[c]), 1.0, 8 * kUlp,
                   where + " u_new");
    }
    // Keys up to the raised reference: no channel moves its frame or its older entries.
    const std::vector<float> raised_u(u.begin(), u.begin() + (entries + 1) * n), raised_r = r;
    for (std::size_t c = 0; c < n; ++c) within[c] = r[c] - (c % 3 ? 0.5f : 0.0f);
    k().aft_window_push_f32(n, entries + 1, u_rows.data(), r.data(), within.data(),
                            u_rows[entries + 1]);
    for (std::size_t c = 0; c < n; ++c) {
      ASSERT_EQ(r[c], raised_r[c]) << where << " c=" << c;
      for (std::size_t j = 0; j <= entries; ++j) {
        ASSERT_EQ(u[j * n + c], raised_u[j * n + c]) << where << " c=" << c << " j=" << j;
      }
      expect_close(u[(entries + 1) * n + c], std::exp(double(within[c]) - r[c]), 1.0, 8 * kUlp,
                   where + " u_new within the headroom");
    }
  }
}

TEST_P(IsaTest, AftWindowKernelsMatchReference) {
  for (std::size_t n : kSizes) {
    constexpr std::size_t entries = 5;
    const auto keys = random_vector(entries * n, -20.0f, 20.0f, 60 + n);
    const auto values = random_vector(entries * n, -1.0f, 1.0f, 61 + n);
    const auto e_flat = random_vector(entries * n, 0.0f, 1.0f, 62 + n);
    const auto q = random_vector(n, -4.0f, 4.0f, 63 + n);
    const auto w = random_vector(n, -2.0f, 2.0f, 64 + n);
    std::vector<const float*> key_rows, value_rows, e_rows;
    for (std::size_t j = 0; j < entries; ++j) {
      key_rows.push_back(&keys[j * n]);
      value_rows.push_back(&values[j * n]);
      e_rows.push_back(&e_flat[j * n]);
    }
    const std::string where = "n=" + std::to_string(n);
    // Reframe, then push a key that is a new maximum in some channels.
    std::vector<float> got_u(entries * n + 16, kGuard), want_u = got_u, got_r = guarded(n),
                                                        want_r = guarded(n);
    auto rows_of = [&](std::vector<float>& u) {
      std::vector<float*> rows;
      for (std::size_t j = 0; j < entries; ++j) rows.push_back(&u[j * n]);
      return rows;
    };
    auto got_rows = rows_of(got_u), want_rows = rows_of(want_u);
    k().aft_window_reframe_f32(n, entries - 1, key_rows.data(), got_rows.data(), got_r.data());
    ref().aft_window_reframe_f32(n, entries - 1, key_rows.data(), want_rows.data(), want_r.data());
    std::vector<float> fresh = random_vector(n, -25.0f, 25.0f, 65 + n);
    k().aft_window_push_f32(n, entries - 1, got_rows.data(), got_r.data(), fresh.data(),
                            got_rows.back());
    ref().aft_window_push_f32(n, entries - 1, want_rows.data(), want_r.data(), fresh.data(),
                              want_rows.back());
    for (std::size_t i = 0; i < entries * n; ++i) {
      expect_close(got_u[i], want_u[i], 1.0, 4 * kUlp, where + " u");
    }
    for (std::size_t c = 0; c < n; ++c) ASSERT_EQ(got_r[c], want_r[c]) << where;
    expect_guard_intact(got_u, entries * n);
    expect_guard_intact(got_r, n);
    // Sums, both weight kinds, and the read-out.
    std::vector<float> sa = guarded(n), sb = guarded(n), ra = guarded(n), rb = guarded(n);
    const std::vector<const float*> u_rows(want_rows.begin(), want_rows.end());
    for (bool per_channel : {false, true}) {
      const bool got_stable =
          per_channel ? k().aft_window_sums_biased_f32(n, entries, e_rows.data(), u_rows.data(),
                                                       value_rows.data(), sa.data(), sb.data())
                      : k().aft_window_sums_f32(n, entries, e_flat.data(), u_rows.data(),
                                                value_rows.data(), sa.data(), sb.data());
      const bool want_stable =
          per_channel ? ref().aft_window_sums_biased_f32(n, entries, e_rows.data(), u_rows.data(),
                                                         value_rows.data(), ra.data(), rb.data())
                      : ref().aft_window_sums_f32(n, entries, e_flat.data(), u_rows.data(),
                                                  value_rows.data(), ra.data(), rb.data());
      EXPECT_EQ(got_stable, want_stable) << where;
      for (std::size_t c = 0; c < n; ++c) {
        expect_close(sb[c], rb[c], rb[c], 4 * entries * kUlp, where + " sb");
        expect_close(sa[c], ra[c], rb[c], 4 * entries * kUlp, where + " sa");
      }
      expect_guard_intact(sa, n);
      expect_guard_intact(sb, n);
    }
    AftState global(n);
    for (std::size_t c = 0; c < n; c += 2) {  // every other channel has global sums
      global.m[c] = want_r[c] + (c % 4 ? 3.0f : -3.0f);
      global.a[c] = 0.5;
      global.b[c] = 2.0;
    }
    std::vector<float> got_y = guarded(n), want_y = guarded(n);
    k().aft_window_output_f32(n, q.data(), global.m.data(), global.a.data(), global.b.data(),
                              want_r.data(), w.data(), ra.data(), rb.data(), got_y.data());
    ref().aft_window_output_f32(n, q.data(), global.m.data(), global.a.data(), global.b.data(),
                                want_r.data(), w.data(), ra.data(), rb.data(), want_y.data());
    for (std::size_t c = 0; c < n; ++c) {
      // Both in float32: the read-out's 9 ulp apart (AftOutputMatchesReference), and the merge
      // of a and sa, whose signs may differ, within a few ulp of its terms' size (rescales by
      // exps within 3 ulp of each other, FMA or not).
      const double frame = double(want_r[c]) + w[c];
      const double e = std::exp(-std::fabs(global.m[c] - frame));
      const double g = global.m[c] >= frame ? 1.0 : e, win = global.m[c] >= frame ? e : 1.0;
      const double terms =
          (std::fabs(global.a[c]) * g + std::fabs(ra[c]) * win) / (global.b[c] * g + rb[c] * win);
      expect_close(got_y[c], want_y[c], std::fabs(want_y[c]) + terms, 9 * kUlp, where + " y");
    }
    expect_guard_intact(got_y, n);
  }
}

// A frame too far above every entry (u and weights near the float minimum) must be reported, also
// when it happens in the last lane of a tail only, and NaN must not pass for stable.
TEST_P(IsaTest, AftWindowSumsReportLostFrames) {
  for (std::size_t n : {1, 3, 16, 21}) {
    std::vector<float> u(n, 1.0f), v(n, 0.5f), sa(n), sb(n);
    const float* u_row = u.data();
    const float* v_row = v.data();
    const float ok = 1.0f, tiny = 0x1p-100f;
    EXPECT_TRUE(k().aft_window_sums_f32(n, 1, &ok, &u_row, &v_row, sa.data(), sb.data())) << n;
    EXPECT_FLOAT_EQ(sa[n - 1], 0.5f);
    EXPECT_FALSE(k().aft_window_sums_f32(n, 1, &tiny, &u_row, &v_row, sa.data(), sb.data())) << n;
    u[n - 1] = 0x1p-100f;
    EXPECT_FALSE(k().aft_window_sums_f32(n, 1, &ok, &u_row, &v_row, sa.data(), sb.data())) << n;
    u[n - 1] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_FALSE(k().aft_window_sums_biased_f32(n, 1, &u_row, &u_row, &v_row, sa.data(), sb.data()))
        << n;
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, IsaTest, testing::ValuesIn(kIsaNames),
                         [](const testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace aft::kernels
