#include "sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "engine/format/error.h"

namespace aft {
namespace {

std::string show(float value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", static_cast<double>(value));
  return text;
}

void require_parameter(bool ok, const std::string& field, const char* rule,
                       const std::string& found) {
  if (!ok) {
    throw Error(AFT_ERR_INVALID_ARGUMENT, field + " must be " + rule + ", found " + found);
  }
}

void validate(const aft_sampler_params& p) {
  require_parameter(std::isfinite(p.temperature) && p.temperature >= 0.0f, "temperature",
                    "a finite number >= 0 (0 = greedy)", show(p.temperature));
  require_parameter(p.top_k >= 0, "top_k", ">= 0 (0 = all tokens)", std::to_string(p.top_k));
  require_parameter(p.top_p > 0.0f && p.top_p <= 1.0f, "top_p", "in (0, 1] (1 = all tokens)",
                    show(p.top_p));
  require_parameter(p.min_p >= 0.0f && p.min_p <= 1.0f, "min_p", "in [0, 1] (0 = off)",
                    show(p.min_p));
  require_parameter(p.repeat_last_n >= -1, "repeat_last_n",
                    ">= -1 (-1 = every token since the reset, 0 = no penalties)",
                    std::to_string(p.repeat_last_n));
  require_parameter(std::isfinite(p.repeat_penalty) && p.repeat_penalty > 0.0f, "repeat_penalty",
                    "a finite number > 0 (1 = off)", show(p.repeat_penalty));
  require_parameter(std::isfinite(p.frequency_penalty), "frequency_penalty",
                    "a finite number (0 = off)", show(p.frequency_penalty));
  require_parameter(std::isfinite(p.presence_penalty), "presence_penalty",
                    "a finite number (0 = off)", show(p.presence_penalty));
  if (p.n_logit_bias > 0 && !p.logit_bias) {
    throw Error(AFT_ERR_INVALID_ARGUMENT,
                "logit_bias is NULL but n_logit_bias is " + std::to_string(p.n_logit_bias));
  }
  for (std::size_t i = 0; i < p.n_logit_bias; ++i) {
    const std::string entry = "logit_bias[" + std::to_string(i) + "]";
    require_parameter(p.logit_bias[i].token >= 0, entry + ".token", "a token id >= 0",
                      std::to_string(p.logit_bias[i].token));
    const float bias = p.logit_bias[i].bias;
    require_parameter(!std::isnan(bias) && bias != INFINITY, entry + ".bias",
                      "a finite number or -inf (a ban)", show(bias));
  }
}

const aft_sampler_params& validated(const aft_sampler_params& p) {
  validate(p);
  return p;
}

}  // namespace

Sampler::Sampler(const aft_sampler_params& params)
    : params_(validated(params)), history_(params.repeat_last_n), rng_state_(params.seed) {
  if (params.n_logit_bias > 0) {
    biases_.assign(params.logit_bias, params.logit_bias + params.n_logit_bias);
  }
  params_.logit_bias = nullptr;
  params_.n_logit_bias = 0;
}

double Sampler::next_uniform() {
  // splitmix64: a full-period 64-bit generator; the top 53 bits make the double.
  uint64_t z = (rng_state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

void Sampler::accept(int32_t token) {
  if (token < 0) {
    throw Error(AFT_ERR_INVALID_ARGUMENT,
                "token must be a token id >= 0, found " + std::to_string(token));
  }
  history_.record(token);
}

void Sampler::reset() {
  history_.clear();
  rng_state_ = params_.seed;
}

int32_t Sampler::sample(const float* logits, std::size_t n_vocab) {
  score(logits, n_vocab);
  collect_candidates();
  const int32_t token = params_.temperature == 0.0f ? most_likely() : draw();
  history_.record(token);
  return token;
}

void Sampler::score(const float* logits, std::size_t n_vocab) {
  if (n_vocab == 0) throw Error(AFT_ERR_INVALID_ARGUMENT, "no logits to sample from (n_vocab 0)");
  if (n_vocab > static_cast<std::size_t>(std::numeric_limits<int32_t>::max()) + 1) {
    throw Error(AFT_ERR_INVALID_ARGUMENT,
                "n_vocab " + std::to_string(n_vocab) + " is more than token ids can number");
  }
  scores_.resize(n_vocab);
  for (std::size_t i = 0; i < n_vocab; ++i) {
    if (std::isnan(logits[i]) || logits[i] == INFINITY) {
      throw Error(AFT_ERR_INVALID_ARGUMENT,
                  "logit " + std::to_string(i) + " is " + show(logits[i]));
    }
    scores_[i] = logits[i];
  }
  for (const aft_logit_bias& bias : biases_) {
    if (static_cast<std::size_t>(bias.token) >= n_vocab) {
      throw Error(AFT_ERR_OUT_OF_RANGE, "logit_bias token " + std::to_string(bias.token) +
                                            " is outside the vocabulary of n_vocab " +
                                            std::to_string(n_vocab) + " tokens");
    }
    scores_[static_cast<std::size_t>(bias.token)] += bias.bias;
  }
  apply_penalties();
}

void Sampler::apply_penalties() {
  for (const auto& [token, count] : history_.counts()) {
    if (static_cast<std::size_t>(token) >= scores_.size()) continue;
    double& s = scores_[static_cast<std::size_t>(token)];
    s = s > 0.0 ? s / params_.repeat_penalty : s * params_.repeat_penalty;
    s -= static_cast<double>(count) * params_.frequency_penalty + params_.presence_penalty;
  }
}

bool Sampler::more_likely(int32_t x, int32_t y) const {
  const double sx = scores_[static_cast<std::size_t>(x)];
  const double sy = scores_[static_cast<std::size_t>(y)];
  return sx > sy || (sx == sy && x < y);
}

void Sampler::collect_candidates() {
  candidates_.clear();
  for (std::size_t i = 0; i < scores_.size(); ++i) {
    if (scores_[i] > -INFINITY) candidates_.push_back(static_cast<int32_t>(i));
  }
  if (candidates_.empty()) {
    throw Error(AFT_ERR_INVALID_ARGUMENT,
                "every logit is -inf after the logit bias: no token is left to pick");
  }
}

int32_t Sampler::most_likely() const {
  return *std::min_element(candidates_.begin(), candidates_.end(),
                           [this](int32_t x, int32_t y) { return more_likely(x, y); });
}

int32_t Sampler::draw() {
  std::size_t keep = candidates_.size();
  if (params_.top_k > 0) keep = std::min(keep, static_cast<std::size_t>(params_.top_k));
  std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(keep),
                    candidates_.end(), [this](int32_t x, int32_t y) { return more_likely(x, y); });

  // Top-p and min-p on the distribution at temperature 1, as weights relative to the most likely
  // token's (1): the probabilities times a common factor.
  const double top = scores_[static_cast<std::size_t>(candidates_[0])];
  weights_.resize(keep);
  double total = 0.0;
  for (std::size_t i = 0; i < keep; ++i) {
    weights_[i] = std::exp(scores_[static_cast<std::size_t>(candidates_[i])] - top);
    total += weights_[i];
  }
  if (params_.top_p < 1.0f) {
    double cumulative = 0.0;
    for (std::size_t i = 0; i < keep; ++i) {
      cumulative += weights_[i];
      if (cumulative >= params_.top_p * total) {
        keep = i + 1;
        break;
      }
    }
  }
  while (keep > 1 && weights_[keep - 1] < params_.min_p) --keep;  // the most likely weighs 1

  // Temperature last: it reshapes the kept tokens' distribution, not which tokens are kept.
  total = 0.0;
  for (std::size_t i = 0; i < keep; ++i) {
    weights_[i] =
        std::exp((scores_[static_cast<std::size_t>(candidates_[i])] - top) / params_.temperature);
    total += weights_[i];
  }
  double target = next_uniform() * total;
  for (std::size_t i = 0; i < keep; ++i) {
    target -= weights_[i];
    if (target < 0.0) return candidates_[i];
  }
  return candidates_[keep - 1];
}

}  // namespace aft
