// AFT-full prefill as matrix products (models/aft/ops/aft_full_prefill.cpp) against token-by-token
// decode, which runs the exact streaming accumulator: both bias kinds, prompts cut into uneven
// chunks, keys and biases spread far beyond the float range of exp(), and every thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "api_handles.h"
#include "logit_error.h"
#include "long_run.h"
#include "model_file_writer.h"
#include "models/aft/ops/aft_state_merge.h"
#include "models/aft/ops/exp_nonpositive.h"

namespace aft::testing {
namespace {

constexpr std::size_t kVocab = 256;

std::vector<int32_t> token_sequence(std::size_t n, uint32_t seed = 11) {
  return aft::testing::token_sequence(n, kVocab, seed);
}

// d_model 80: a channel block of 64 and a tail of 16. 600 tokens span two key blocks (512
// positions each) and, in one call, three chunks (at most 256 rows each).
constexpr std::size_t kTokens = 600;
nlohmann::json full_config(const std::string& bias_kind, int64_t d_model = 80) {
  nlohmann::json config = tiny_config("full");
  config["d_model"] = d_model;
  config["max_seq_len"] = 640;
  if (bias_kind == "factorized") {
    config["full_bias"] = "factorized";
    config["bias_rank"] = 8;
  }
  return config;
}

bool contains(const std::string& name, const char* part) {
  return name.find(part) != std::string::npos;
}

// The prefill's exp: every 97th float in [-87.33, 0] (walked by their bits, from -0 down) within
// 2 ulp of the float64 exp, and its edges.
TEST(ExpNonpositive, MatchesExpWithin2Ulp) {
  const float lowest = -87.3365f;  // just above ln(2^-126)
  const auto bits_of = [](float x) {
    uint32_t bits;
    std::memcpy(&bits, &x, sizeof(bits));
    return bits;
  };
  double worst_ulp = 0.0;
  for (uint32_t bits = bits_of(-0.0f); bits <= bits_of(lowest); bits += 97) {
    float x;
    std::memcpy(&x, &bits, sizeof(x));
    const double want = std::exp(static_cast<double>(x));
    const double ulp = std::ldexp(1.0, std::ilogb(static_cast<float>(want)) - 23);
    worst_ulp = std::max(worst_ulp, std::fabs(exp_nonpositive(x) - want) / ulp);
  }
  EXPECT_LE(worst_ulp, 2.0);
  EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(exp_nonpositive(-87.4f), 0.0f);
  EXPECT_EQ(exp_nonpositive(-1e30f), 0.0f);
  EXPECT_EQ(exp_nonpositive(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_TRUE(std::isnan(exp_nonpositive(std::numeric_limits<float>::quiet_NaN())));
}

// The merge's exp, in double: 10^5 points spread over [-708.39, 0] within 2 ulp of long double's
// exp, and its edges.
TEST(ExpNonpositive, DoubleMatchesExpWithin2Ulp) {
  const double lowest = -708.396;  // just above ln(2^-1022)
  double worst_ulp = 0.0;
  for (int i = 0; i <= 100000; ++i) {
    const double x = lowest * i / 100000 * (1.0 + 1e-9 * (i % 7));  // not only round fractions
    if (x < lowest) continue;
    const long double want = std::exp(static_cast<long double>(x));
    const double ulp = std::ldexp(1.0, std::ilogb(static_cast<double>(want)) - 52);
    worst_ulp =
        std::max(worst_ulp, static_cast<double>(std::fabs(exp_nonpositive(x) - want)) / ulp);
  }
  EXPECT_LE(worst_ulp, 2.0);
  EXPECT_EQ(exp_nonpositive(0.0), 1.0);
  EXPECT_EQ(exp_nonpositive(-708.4), 0.0);
  EXPECT_EQ(exp_nonpositive(-1e300), 0.0);
  EXPECT_EQ(exp_nonpositive(-std::numeric_limits<double>::infinity()), 0.0);
  EXPECT_TRUE(std::isnan(exp_nonpositive(std::numeric_limits<double>::quiet_NaN())));
}

// Merging partial states (the prefill scans and the AFT-full blocks): an empty partial changes
// nothing, even in an empty state; into an empty state a partial arrives exactly; otherwise the
// state over both, rescaled to the larger maximum.
TEST(AftStateMerge, EmptyPartialsAndEmptyStates) {
  const double inf = std::numeric_limits<double>::infinity();
  const AftState empty_both = merge(-inf, 0.0, 0.0, -inf, 0.0, 0.0);
  EXPECT_EQ(empty_both.m, -inf);
  EXPECT_EQ(empty_both.a, 0.0);
  EXPECT_EQ(empty_both.b, 0.0);
  const AftState kept = merge(2.0, 3.0, 4.0, -inf, 0.0, 0.0);
  EXPECT_EQ(kept.m, 2.0);
  EXPECT_EQ(kept.a, 3.0);
  EXPECT_EQ(kept.b, 4.0);
  const AftState arrived = merge(-inf, 0.0, 0.0, 2.0, 3.0, 4.0);
  EXPECT_EQ(arrived.m, 2.0);
  EXPECT_EQ(arrived.a, 3.0);
  EXPECT_EQ(arrived.b, 4.0);
  // (m, a, b) = (0, 1, 1) and (ln 2, 2, 3): over both, at m = ln 2, a = 1/2 + 2, b = 1/2 + 3.
  const AftState both = merge(0.0, 1.0, 1.0, std::log(2.0), 2.0, 3.0);
  EXPECT_EQ(both.m, std::log(2.0));
  EXPECT_NEAR(both.a, 2.5, 1e-15);
  EXPECT_NEAR(both.b, 3.5, 1e-15);
}

class AftFullPrefillTest : public ::testing::TestWithParam<const char*> {
 protected:
  ModelHandle load(const nlohmann::json& config, const std::vector<TestTensor>& tensors) {
    write_model_file(file_.path(), config, tokenizer_for(kVocab), tensors);
    return load_model(file_.path());
  }
  TempFile file_;
};

// The prompt in one call, and in uneven chunks that start and end inside key blocks.
const std::vector<std::vector<std::size_t>> kChunkings = {
    {kTokens}, {1, 37, 200, 62, 300}, {255, 2, 256, 87}};

TEST_P(AftFullPrefillTest, PrefillInAnyChunksMatchesDecode) {
  const nlohmann::json config = full_config(GetParam());
  ModelHandle model = load(config, random_tensors(config, 5));
  const std::vector<int32_t> tokens = token_sequence(kTokens);
  const std::vector<float> decoded = decode_each(model.get(), tokens);
  for (const std::vector<std::size_t>& chunks : kChunkings) {
    EXPECT_LE(max_relative_error(eval_chunks(model.get(), tokens, chunks), decoded, kVocab), 1e-4)
        << "chunks of " << ::testing::PrintToString(chunks);
  }
}

TEST_P(AftFullPrefillTest, DecodeContinuesAfterPrefill) {
  const nlohmann::json config = full_config(GetParam());
  ModelHandle model = load(config, random_tensors(config, 6));
  const std::vector<int32_t> tokens = token_sequence(kTokens, 3);
  std::vector<std::size_t> chunks{300};
  chunks.resize(kTokens - 300 + 1, 1);
  EXPECT_LE(max_relative_error(eval_chunks(model.get(), tokens, chunks),
                               decode_each(model.get(), tokens), kVocab),
            1e-4);
}

// Keys and biases spread by hundreds: a block's products underflow unless its maxima coincide, and
// those blocks must be summed exactly. Logits stay finite and agree with decode. Those exact sums
// run 60 times slower under the sanitizers (3 minutes for 600 tokens), where half the tokens in one
// chunking still cross a key block and start and end chunks inside key blocks.
TEST_P(AftFullPrefillTest, AdversarialKeysAndBiasesMatchDecode) {
  const bool slow = aft::test_data::slow_test_run();
  const std::size_t n_tokens = slow ? kTokens / 2 : kTokens;
  const std::vector<std::vector<std::size_t>> chunkings =
      slow ? std::vector<std::vector<std::size_t>>{{1, 37, 200, 62}} : kChunkings;
  const nlohmann::json config = full_config(GetParam());
  std::vector<TestTensor> tensors = random_tensors(config, 7);
  for (TestTensor& t : tensors) {
    // Weights are uniform in [-0.1, 0.1]: keys get a standard deviation of about 100; table biases
    // are uniform in [-200, 200], factorized ones (rank 8) have a standard deviation of about 90.
    float scale = 1.0f;
    if (contains(t.name, ".mixer.key.")) scale = 200.0f;
    if (contains(t.name, ".mixer.pos_bias")) scale = 2000.0f;
    if (contains(t.name, ".mixer.pos_u") || contains(t.name, ".mixer.pos_v")) scale = 100.0f;
    for (float& v : t.values) v *= scale;
  }
  ModelHandle model = load(config, tensors);
  const std::vector<int32_t> tokens = token_sequence(n_tokens, 5);
  const std::vector<float> decoded = decode_each(model.get(), tokens);
  for (const std::vector<std::size_t>& chunks : chunkings) {
    const std::vector<float> prefill = eval_chunks(model.get(), tokens, chunks);
    for (float logit : prefill) ASSERT_TRUE(std::isfinite(logit));
    EXPECT_LE(max_relative_error(prefill, decoded, kVocab), 1e-4)
        << "chunks of " << ::testing::PrintToString(chunks);
  }
}

// d_model 768 is 12 channel blocks, split differently by 1 to 4 threads: still bit-identical,
// for prefill and for decode after it.
TEST_P(AftFullPrefillTest, ThreadCountDoesNotChangeLogits) {
  nlohmann::json config = full_config(GetParam(), 768);
  config["n_layers"] = 1;
  ModelHandle model = load(config, random_tensors(config, 8));
  const std::vector<int32_t> tokens = token_sequence(kTokens, 9);
  const std::vector<std::size_t> chunks{1, 37, 200, 62, 298, 1, 1};
  const std::vector<float> one = eval_chunks(model.get(), tokens, chunks, 1);
  for (int threads : {2, 3, 4}) {
    const std::vector<float> many = eval_chunks(model.get(), tokens, chunks, threads);
    ASSERT_EQ(one.size(), many.size());
    for (std::size_t i = 0; i < one.size(); ++i) {
      ASSERT_EQ(one[i], many[i]) << threads << " threads, logit " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BiasKinds, AftFullPrefillTest, ::testing::Values("table", "factorized"));

}  // namespace
}  // namespace aft::testing
