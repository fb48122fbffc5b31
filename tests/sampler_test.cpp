// The sampler chain through the C API: each stage alone against hand-computed expectations, the
// chain's order, determinism, the distribution of draws, and every bad input refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "api_handles.h"

namespace aft::testing {
namespace {

std::string last_error() { return aft_last_error(); }

// Every filter and penalty off: the plain softmax at this temperature.
aft_sampler_params plain(float temperature = 1.0f, uint64_t seed = 1) {
  aft_sampler_params params = aft_sampler_default_params();
  params.temperature = temperature;
  params.top_k = 0;
  params.top_p = 1.0f;
  params.min_p = 0.0f;
  params.seed = seed;
  return params;
}

aft_sampler_params greedy() { return plain(0.0f); }

SamplerHandle make(const aft_sampler_params& params) {
  aft_sampler* sampler = nullptr;
  EXPECT_EQ(aft_sampler_create(&params, &sampler), AFT_OK) << last_error();
  return SamplerHandle(sampler);
}

int32_t sample(aft_sampler* sampler, const std::vector<float>& logits) {
  int32_t token = -1;
  EXPECT_EQ(aft_sampler_sample(sampler, logits.data(), logits.size(), &token), AFT_OK)
      << last_error();
  return token;
}

std::vector<int32_t> draw(aft_sampler* sampler, const std::vector<float>& logits, int n) {
  std::vector<int32_t> tokens(static_cast<std::size_t>(n));
  for (int32_t& token : tokens) token = sample(sampler, logits);
  return tokens;
}

std::set<int32_t> seen(const aft_sampler_params& params, const std::vector<float>& logits,
                       int n = 2000) {
  SamplerHandle sampler = make(params);
  const std::vector<int32_t> tokens = draw(sampler.get(), logits, n);
  return std::set<int32_t>(tokens.begin(), tokens.end());
}

// The greedy choice after the history was recorded with aft_sampler_accept.
int32_t greedy_after(aft_sampler_params params, const std::vector<int32_t>& history,
                     const std::vector<float>& logits) {
  params.temperature = 0.0f;
  SamplerHandle sampler = make(params);
  for (int32_t token : history) EXPECT_EQ(aft_sampler_accept(sampler.get(), token), AFT_OK);
  return sample(sampler.get(), logits);
}

// log(w): a softmax at temperature 1 gives probabilities proportional to w.
std::vector<float> logits_of_weights(const std::vector<double>& weights) {
  std::vector<float> logits;
  for (double w : weights) logits.push_back(static_cast<float>(std::log(w)));
  return logits;
}

// Pearson's statistic of the draws against the expected probabilities.
double chi_square(const std::vector<int32_t>& tokens, const std::vector<double>& probabilities) {
  std::vector<double> counts(probabilities.size(), 0.0);
  for (int32_t token : tokens) counts.at(static_cast<std::size_t>(token)) += 1.0;
  double statistic = 0.0;
  for (std::size_t i = 0; i < probabilities.size(); ++i) {
    const double expected = probabilities[i] * static_cast<double>(tokens.size());
    statistic += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return statistic;
}

// The 99.9% quantile of chi-square with 3 degrees of freedom (4 tokens).
constexpr double kChiSquare3Dof999 = 16.27;

TEST(Sampler, DefaultsAreLlamaCpps) {
  const aft_sampler_params p = aft_sampler_default_params();
  EXPECT_EQ(p.temperature, 0.8f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_EQ(p.top_p, 0.95f);
  EXPECT_EQ(p.min_p, 0.05f);
  EXPECT_EQ(p.repeat_last_n, 64);
  EXPECT_EQ(p.repeat_penalty, 1.0f);
  EXPECT_EQ(p.frequency_penalty, 0.0f);
  EXPECT_EQ(p.presence_penalty, 0.0f);
  EXPECT_EQ(p.logit_bias, nullptr);
  EXPECT_EQ(p.n_logit_bias, 0u);
  SamplerHandle sampler = make(p);
  EXPECT_EQ(sample(sampler.get(), {0.0f, 5.0f}), 1);
}

TEST(Sampler, NullPointersAreRejected) {
  aft_sampler* sampler = nullptr;
  EXPECT_EQ(aft_sampler_create(nullptr, nullptr), AFT_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(aft_sampler_create(nullptr, &sampler), AFT_OK) << "NULL params: the defaults";
  SamplerHandle handle(sampler);
  const float logit = 0.0f;
  int32_t token = -1;
  EXPECT_EQ(aft_sampler_sample(nullptr, &logit, 1, &token), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("sampler is NULL"), std::string::npos) << last_error();
  EXPECT_EQ(aft_sampler_sample(sampler, nullptr, 1, &token), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("logits is NULL"), std::string::npos) << last_error();
  EXPECT_EQ(aft_sampler_sample(sampler, &logit, 1, nullptr), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("token is NULL"), std::string::npos) << last_error();
  EXPECT_EQ(aft_sampler_sample(sampler, &logit, 0, &token), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(aft_sampler_accept(nullptr, 0), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(aft_sampler_reset(nullptr), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(token, -1);
  aft_sampler_free(nullptr);
}

struct BadParameter {
  void (*set)(aft_sampler_params&);
  const char* message;  // names the field and the value found
};

TEST(Sampler, BadParametersAreRejectedByName) {
  static const aft_logit_bias kNegativeToken[] = {{2, 1.0f}, {-3, 1.0f}};
  static const aft_logit_bias kNanBias[] = {{2, NAN}};
  static const aft_logit_bias kInfiniteBias[] = {{2, INFINITY}};
  const BadParameter cases[] = {
      {[](aft_sampler_params& p) { p.temperature = -1.0f; }, "temperature must be"},
      {[](aft_sampler_params& p) { p.temperature = NAN; }, "temperature"},
      {[](aft_sampler_params& p) { p.temperature = INFINITY; }, "found inf"},
      {[](aft_sampler_params& p) { p.top_k = -1; },
       "top_k must be >= 0 (0 = all tokens), found -1"},
      {[](aft_sampler_params& p) { p.top_p = 0.0f; }, "top_p must be in (0, 1]"},
      {[](aft_sampler_params& p) { p.top_p = 1.5f; }, "found 1.5"},
      {[](aft_sampler_params& p) { p.top_p = NAN; },
       "top_p must be in (0, 1] (1 = all tokens), found nan"},
      {[](aft_sampler_params& p) { p.min_p = -0.25f; },
       "min_p must be in [0, 1] (0 = off), found -0.25"},
      {[](aft_sampler_params& p) { p.min_p = 1.5f; }, "min_p"},
      {[](aft_sampler_params& p) { p.min_p = NAN; }, "min_p"},
      {[](aft_sampler_params& p) { p.repeat_last_n = -2; }, "repeat_last_n must be >= -1"},
      {[](aft_sampler_params& p) { p.repeat_penalty = 0.0f; },
       "repeat_penalty must be a finite number > 0 (1 = off), found 0"},
      {[](aft_sampler_params& p) { p.repeat_penalty = -1.0f; }, "repeat_penalty"},
      {[](aft_sampler_params& p) { p.repeat_penalty = INFINITY; }, "repeat_penalty"},
      {[](aft_sampler_params& p) { p.frequency_penalty = NAN; },
       "frequency_penalty must be a finite number (0 = off), found nan"},
      {[](aft_sampler_params& p) { p.frequency_penalty = INFINITY; }, "frequency_penalty"},
      {[](aft_sampler_params& p) { p.presence_penalty = -INFINITY; },
       "presence_penalty must be a finite number (0 = off), found -inf"},
      {[](aft_sampler_params& p) { p.n_logit_bias = 2; },
       "logit_bias is NULL but n_logit_bias is 2"},
      {[](aft_sampler_params& p) {
         p.logit_bias = kNegativeToken;
         p.n_logit_bias = 2;
       },
       "logit_bias[1].token must be a token id >= 0, found -3"},
      {[](aft_sampler_params& p) {
         p.logit_bias = kNanBias;
         p.n_logit_bias = 1;
       },
       "logit_bias[0].bias must be a finite number or -inf (a ban), found nan"},
      {[](aft_sampler_params& p) {
         p.logit_bias = kInfiniteBias;
         p.n_logit_bias = 1;
       },
       "logit_bias[0].bias must be a finite number or -inf (a ban), found inf"},
  };
  for (const BadParameter& bad : cases) {
    aft_sampler_params params = aft_sampler_default_params();
    bad.set(params);
    aft_sampler* sampler = nullptr;
    EXPECT_EQ(aft_sampler_create(&params, &sampler), AFT_ERR_INVALID_ARGUMENT) << bad.message;
    EXPECT_EQ(sampler, nullptr);
    EXPECT_NE(last_error().find(bad.message), std::string::npos)
        << "expected \"" << bad.message << "\" in \"" << last_error() << "\"";
  }
}

TEST(Sampler, GreedyPicksTheFirstLargest) {
  const std::vector<float> logits = {0.5f, 3.0f, -1.0f, 3.0f};
  SamplerHandle sampler = make(greedy());
  EXPECT_EQ(draw(sampler.get(), logits, 3), (std::vector<int32_t>{1, 1, 1}));
  aft_sampler_params top1 = plain(1.0f);
  top1.top_k = 1;
  EXPECT_EQ(seen(top1, logits, 100), (std::set<int32_t>{1}));
}

TEST(Sampler, SameSeedSameTokens) {
  const std::vector<float> logits = {1.0f, 0.5f, 0.2f, 0.9f, -0.3f};
  SamplerHandle a = make(plain(1.0f, 42));
  SamplerHandle b = make(plain(1.0f, 42));
  SamplerHandle c = make(plain(1.0f, 43));
  const std::vector<int32_t> first = draw(a.get(), logits, 50);
  EXPECT_EQ(first, draw(b.get(), logits, 50));
  EXPECT_NE(first, draw(c.get(), logits, 50));
}

// Draws follow softmax(logits / temperature): with weights w at temperature 1, probabilities
// proportional to w^(1 / temperature).
TEST(Sampler, DrawsFollowTheSoftmaxAtTheTemperature) {
  const std::vector<double> weights = {1, 2, 3, 4};
  const std::vector<float> logits = logits_of_weights(weights);
  auto probabilities_at = [&](double temperature) {
    std::vector<double> p;
    double total = 0.0;
    for (double w : weights) total += std::pow(w, 1.0 / temperature);
    for (double w : weights) p.push_back(std::pow(w, 1.0 / temperature) / total);
    return p;
  };
  for (float temperature : {1.0f, 0.5f, 2.0f}) {
    SamplerHandle sampler = make(plain(temperature, 7));
    EXPECT_LT(chi_square(draw(sampler.get(), logits, 20000), probabilities_at(temperature)),
              kChiSquare3Dof999)
        << "temperature " << temperature;
  }
  // The bound can fail: temperature 1's draws against temperature 0.5's probabilities.
  SamplerHandle sampler = make(plain(1.0f, 7));
  EXPECT_GT(chi_square(draw(sampler.get(), logits, 20000), probabilities_at(0.5)), 100.0);
}

TEST(Sampler, TopKKeepsTheKMostLikely) {
  const std::vector<float> logits = logits_of_weights({1, 2, 3, 4});
  aft_sampler_params params = plain();
  params.top_k = 2;
  EXPECT_EQ(seen(params, logits), (std::set<int32_t>{2, 3}));
  params.top_k = 3;
  EXPECT_EQ(seen(params, logits), (std::set<int32_t>{1, 2, 3}));
}

// Probabilities 0.4, 0.3, 0.2, 0.1: the smallest set reaching 0.6 is {3, 2} (0.7).
TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  const std::vector<float> logits = logits_of_weights({1, 2, 3, 4});
  aft_sampler_params params = plain();
  params.top_p = 0.6f;
  EXPECT_EQ(seen(params, logits), (std::set<int32_t>{2, 3}));
  params.top_p = 0.8f;  // 0.9
  EXPECT_EQ(seen(params, logits), (std::set<int32_t>{1, 2, 3}));
}

// Weights relative to the most likely 1, 0.5, 0.2, 0.09, 0.05: min_p 0.1 keeps the first three.
TEST(Sampler, MinPDropsExactlyTheTokensBelowTheThreshold) {
  const std::vector<float> logits = logits_of_weights({0.2, 1, 0.09, 0.5, 0.05});
  aft_sampler_params params = plain();
  params.min_p = 0.1f;
  EXPECT_EQ(seen(params, logits), (std::set<int32_t>{0, 1, 3}));
  params.min_p = 0.3f;
  EXPECT_EQ(seen(params, logits), (std::set<int32_t>{1, 3}));
  params.min_p = 0.0f;
  EXPECT_EQ(seen(params, logits, 4000), (std::set<int32_t>{0, 1, 2, 3, 4}));
}

// llama.cpp's order: top-p and min-p judge the distribution at temperature 1, temperature comes
// last. At temperature 100 the tempered distribution is nearly uniform (top-p 0.6 of it would keep
// three tokens, min-p 0.3 all four), yet the kept sets are those of temperature 1.
TEST(Sampler, TemperatureComesAfterTheFilters) {
  const std::vector<float> logits = logits_of_weights({1, 2, 3, 4});
  aft_sampler_params params = plain(100.0f);
  params.top_p = 0.6f;
  EXPECT_EQ(seen(params, logits), (std::set<int32_t>{2, 3}));
  params.top_p = 1.0f;
  params.min_p = 0.6f;  // keeps weights >= 0.6 x 4
  EXPECT_EQ(seen(params, logits), (std::set<int32_t>{2, 3}));
}

TEST(Sampler, LogitBiasBansOrForcesATokenAndIsAdded) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  const aft_logit_bias ban[] = {{2, -INFINITY}};
  aft_sampler_params params = greedy();
  params.logit_bias = ban;
  params.n_logit_bias = 1;
  EXPECT_EQ(greedy_after(params, {}, logits), 1);
  params.temperature = 1.0f;
  EXPECT_EQ(seen(params, logits), (std::set<int32_t>{0, 1}));

  const aft_logit_bias force[] = {{0, 100.0f}};
  params.logit_bias = force;
  EXPECT_EQ(seen(params, logits), (std::set<int32_t>{0}));

  // Added: 1 + 1.9 < 3 < 1 + 2.1; two entries for one token add up.
  const aft_logit_bias small[] = {{0, 1.9f}};
  const aft_logit_bias larger[] = {{0, 2.1f}};
  const aft_logit_bias twice[] = {{0, 1.0f}, {0, 1.1f}};
  params.logit_bias = small;
  EXPECT_EQ(greedy_after(params, {}, logits), 2);
  params.logit_bias = larger;
  EXPECT_EQ(greedy_after(params, {}, logits), 0);
  params.logit_bias = twice;
  params.n_logit_bias = 2;
  EXPECT_EQ(greedy_after(params, {}, logits), 0);
}

TEST(Sampler, LogitBiasOutsideTheVocabularyIsAnErrorWhenSampling) {
  const aft_logit_bias outside[] = {{3, 1.0f}};
  aft_sampler_params params = greedy();
  params.logit_bias = outside;
  params.n_logit_bias = 1;
  SamplerHandle sampler = make(params);
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  int32_t token = -1;
  EXPECT_EQ(aft_sampler_sample(sampler.get(), logits.data(), 3, &token), AFT_ERR_OUT_OF_RANGE);
  EXPECT_NE(last_error().find("logit_bias token 3 is outside the vocabulary of n_vocab 3"),
            std::string::npos)
      << last_error();
  EXPECT_EQ(token, -1);
  EXPECT_EQ(sample(sampler.get(), {1.0f, 2.0f, 3.0f, 0.0f}), 2) << "4 tokens: it applies";
}

// Positive logits are divided by the penalty, negative ones multiplied (llama.cpp).
TEST(Sampler, RepeatPenaltyTurnsTheGreedyWinnerIntoTheRunnerUp) {
  aft_sampler_params params = greedy();
  params.repeat_penalty = 1.5f;  // 2 / 1.5 = 1.33 < 1.5; multiplied it would be 3
  EXPECT_EQ(greedy_after(params, {}, {2.0f, 1.5f}), 0);
  EXPECT_EQ(greedy_after(params, {0}, {2.0f, 1.5f}), 1);
  EXPECT_EQ(greedy_after(params, {1}, {2.0f, 1.5f}), 0);
  // -1 x 1.5 = -1.5 < -1.2; divided it would be -0.67 and stay the winner.
  EXPECT_EQ(greedy_after(params, {0}, {-1.0f, -1.2f}), 1);
  params.repeat_penalty = 1.2f;  // 2 / 1.2 = 1.67 > 1.5, -1 x 1.2 = -1.2 > -1.25
  EXPECT_EQ(greedy_after(params, {0}, {2.0f, 1.5f}), 0);
  EXPECT_EQ(greedy_after(params, {0}, {-1.0f, -1.25f}), 0);
}

// Token 0 has logit 3 and occurs twice in the history; a probe token 1 with a logit just below or
// just above the expected penalised value shows which side it is on.
TEST(Sampler, FrequencyAndPresencePenaltiesSubtract) {
  const std::vector<int32_t> history = {0, 2, 0};
  auto penalised_between = [&](const aft_sampler_params& params, float low, float high) {
    EXPECT_EQ(greedy_after(params, history, {3.0f, low, -10.0f}), 0) << "above " << low;
    EXPECT_EQ(greedy_after(params, history, {3.0f, high, -10.0f}), 1) << "below " << high;
  };
  aft_sampler_params params = greedy();
  params.frequency_penalty = 0.3f;  // 3 - 2 x 0.3 = 2.4
  penalised_between(params, 2.35f, 2.45f);
  params.frequency_penalty = 0.0f;
  params.presence_penalty = 0.5f;  // 3 - 0.5 = 2.5, once whatever the count
  penalised_between(params, 2.45f, 2.55f);
  params.frequency_penalty = 0.3f;  // 3 - 0.6 - 0.5 = 1.9
  penalised_between(params, 1.85f, 1.95f);
  params.repeat_penalty = 2.0f;  // 3 / 2 - 0.6 - 0.5 = 0.4: division first
  penalised_between(params, 0.35f, 0.45f);
}

TEST(Sampler, RepeatLastNWindowForgetsOlderTokens) {
  aft_sampler_params params = greedy();
  params.repeat_penalty = 100.0f;
  const std::vector<float> logits = {2.0f, 1.9f, 1.8f, 1.7f};
  params.repeat_last_n = 2;  // {1, 2} remain: 0 is back
  EXPECT_EQ(greedy_after(params, {0, 1, 2}, logits), 0);
  params.repeat_last_n = 3;
  EXPECT_EQ(greedy_after(params, {0, 1, 2}, logits), 3);
  params.repeat_last_n = 0;  // no penalties
  EXPECT_EQ(greedy_after(params, {0, 1, 2}, logits), 0);

  // Sampled tokens are recorded too: with a window of 1 the two best alternate.
  params.repeat_last_n = 1;
  SamplerHandle one = make(params);
  EXPECT_EQ(draw(one.get(), logits, 5), (std::vector<int32_t>{0, 1, 0, 1, 0}));
  // -1: every token since the reset; once all four are penalised 0 leads again.
  params.repeat_last_n = -1;
  SamplerHandle all = make(params);
  EXPECT_EQ(draw(all.get(), logits, 5), (std::vector<int32_t>{0, 1, 2, 3, 0}));
}

// With -1 the counts grow without bound: 5 x 0.5 off token 0.
TEST(Sampler, UnboundedHistoryCountsEveryToken) {
  aft_sampler_params params = greedy();
  params.repeat_last_n = -1;
  params.frequency_penalty = 0.5f;
  const std::vector<int32_t> five_zeros(5, 0);
  EXPECT_EQ(greedy_after(params, five_zeros, {3.0f, 0.45f}), 0);
  EXPECT_EQ(greedy_after(params, five_zeros, {3.0f, 0.55f}), 1);
  params.repeat_last_n = 4;  // 4 x 0.5
  EXPECT_EQ(greedy_after(params, five_zeros, {3.0f, 0.95f}), 0);
  EXPECT_EQ(greedy_after(params, five_zeros, {3.0f, 1.05f}), 1);
}

TEST(Sampler, AcceptRefusesNegativeTokensAndIgnoresTokensPastTheVocabulary) {
  SamplerHandle sampler = make(greedy());
  EXPECT_EQ(aft_sampler_accept(sampler.get(), -1), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("found -1"), std::string::npos) << last_error();
  aft_sampler_params params = greedy();
  params.repeat_penalty = 100.0f;
  EXPECT_EQ(greedy_after(params, {7}, {1.0f, 0.5f}), 0);
}

TEST(Sampler, ResetForgetsTheHistoryAndRepeatsTheDraws) {
  aft_sampler_params params = plain(1.0f, 5);
  params.repeat_penalty = 3.0f;
  params.presence_penalty = 1.0f;
  const std::vector<float> logits = logits_of_weights({1, 2, 3, 4, 5, 6});
  SamplerHandle sampler = make(params);
  ASSERT_EQ(aft_sampler_accept(sampler.get(), 5), AFT_OK);
  const std::vector<int32_t> first = draw(sampler.get(), logits, 40);
  ASSERT_EQ(aft_sampler_reset(sampler.get()), AFT_OK);
  ASSERT_EQ(aft_sampler_accept(sampler.get(), 5), AFT_OK);
  EXPECT_EQ(draw(sampler.get(), logits, 40), first);
  SamplerHandle fresh = make(params);
  ASSERT_EQ(aft_sampler_accept(fresh.get(), 5), AFT_OK);
  EXPECT_EQ(draw(fresh.get(), logits, 40), first);

  // Greedy: 0 penalised, then forgotten by the reset.
  params = greedy();
  params.repeat_penalty = 100.0f;
  SamplerHandle greedy_sampler = make(params);
  EXPECT_EQ(draw(greedy_sampler.get(), {2.0f, 1.0f}, 2), (std::vector<int32_t>{0, 1}));
  ASSERT_EQ(aft_sampler_reset(greedy_sampler.get()), AFT_OK);
  EXPECT_EQ(sample(greedy_sampler.get(), {2.0f, 1.0f}), 0);
}

TEST(Sampler, NoTokenLeftOrNonFiniteLogitsAreErrors) {
  const aft_logit_bias ban_zero[] = {{0, -INFINITY}};
  for (float temperature : {0.0f, 0.8f}) {
    aft_sampler_params params = plain(temperature);
    SamplerHandle sampler = make(params);
    const auto expect_error = [&](aft_sampler* s, const std::vector<float>& logits,
                                  const std::string& message) {
      int32_t token = -1;
      EXPECT_EQ(aft_sampler_sample(s, logits.data(), logits.size(), &token),
                AFT_ERR_INVALID_ARGUMENT)
          << message;
      EXPECT_EQ(token, -1) << "never a made-up token";
      EXPECT_NE(last_error().find(message), std::string::npos) << last_error();
    };
    expect_error(sampler.get(), {0.0f, NAN}, "logit 1 is nan");
    expect_error(sampler.get(), {0.0f, 1.0f, INFINITY}, "logit 2 is inf");
    expect_error(sampler.get(), {-INFINITY, -INFINITY}, "every logit is -inf");
    params.logit_bias = ban_zero;
    params.n_logit_bias = 1;
    SamplerHandle banned = make(params);
    expect_error(banned.get(), {5.0f, -INFINITY}, "every logit is -inf after the logit bias");
    EXPECT_EQ(sample(sampler.get(), {-INFINITY, 1.0f}), 1);
    EXPECT_EQ(sample(banned.get(), {5.0f, -3.0f}), 1);
  }
}

TEST(Sampler, AFailedSampleChangesNothing) {
  aft_sampler_params params = plain(1.0f, 9);
  params.repeat_penalty = 2.0f;
  const std::vector<float> logits = logits_of_weights({1, 2, 3, 4, 5});
  SamplerHandle failed = make(params);
  SamplerHandle fresh = make(params);
  int32_t token = -1;
  const std::vector<float> bad = {1.0f, NAN, 0.0f, 0.0f, 0.0f};
  EXPECT_EQ(aft_sampler_sample(failed.get(), bad.data(), bad.size(), &token),
            AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(draw(failed.get(), logits, 30), draw(fresh.get(), logits, 30));
}

TEST(Sampler, InputLogitsAreNotModified) {
  const aft_logit_bias bias[] = {{1, 2.0f}, {3, -INFINITY}};
  aft_sampler_params params = plain(0.7f, 3);
  params.top_k = 3;
  params.top_p = 0.9f;
  params.min_p = 0.1f;
  params.repeat_penalty = 1.3f;
  params.frequency_penalty = 0.2f;
  params.presence_penalty = 0.1f;
  params.logit_bias = bias;
  params.n_logit_bias = 2;
  SamplerHandle sampler = make(params);
  ASSERT_EQ(aft_sampler_accept(sampler.get(), 0), AFT_OK);
  const std::vector<float> logits = {1.5f, -0.5f, 0.25f, 2.0f, -INFINITY};
  std::vector<float> copy = logits;
  for (int i = 0; i < 20; ++i) sample(sampler.get(), copy);
  EXPECT_EQ(std::memcmp(copy.data(), logits.data(), logits.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace aft::testing
