#include "sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "error.h"

namespace aft {

Sampler::Sampler(const aft_sampler_params& params) : params_(params), rng_state_(params.seed) {
  if (!(params.temperature >= 0.0f) || !std::isfinite(params.temperature)) {
    throw Error(AFT_ERR_INVALID_ARGUMENT, "temperature must be a finite number >= 0, found " +
                                              std::to_string(params.temperature));
  }
  if (params.top_k < 0) {
    throw Error(AFT_ERR_INVALID_ARGUMENT,
                "top_k must be >= 0 (0 = all tokens), found " + std::to_string(params.top_k));
  }
  if (!(params.top_p > 0.0f && params.top_p <= 1.0f)) {
    throw Error(AFT_ERR_INVALID_ARGUMENT,
                "top_p must be in (0, 1], found " + std::to_string(params.top_p));
  }
}

double Sampler::next_uniform() {
  // splitmix64: a full-period 64-bit generator; the top 53 bits make the double.
  uint64_t z = (rng_state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

int32_t Sampler::sample(const float* logits, std::size_t n_vocab) {
  if (n_vocab == 0) throw Error(AFT_ERR_INVALID_ARGUMENT, "no logits to sample from");
  for (std::size_t i = 0; i < n_vocab; ++i) {
    if (std::isnan(logits[i]) || logits[i] == INFINITY) {
      throw Error(AFT_ERR_INVALID_ARGUMENT,
                  "logit " + std::to_string(i) + " is " + std::to_string(logits[i]));
    }
  }
  // Most likely first; ties go to the lower token id, so the order never depends on the sort.
  auto more_likely = [logits](int32_t x, int32_t y) {
    return logits[x] > logits[y] || (logits[x] == logits[y] && x < y);
  };
  if (params_.temperature == 0.0f || params_.top_k == 1) {
    int32_t best = 0;
    for (std::size_t i = 1; i < n_vocab; ++i) {
      if (more_likely(static_cast<int32_t>(i), best)) best = static_cast<int32_t>(i);
    }
    return best;
  }

  std::size_t keep = n_vocab;
  if (params_.top_k > 0) keep = std::min(keep, static_cast<std::size_t>(params_.top_k));
  order_.resize(n_vocab);
  std::iota(order_.begin(), order_.end(), 0);
  std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(keep),
                    order_.end(), more_likely);

  // Softmax over the kept tokens at this temperature, in double.
  probabilities_.resize(keep);
  const double top = logits[order_[0]];
  if (std::isinf(top)) throw Error(AFT_ERR_INVALID_ARGUMENT, "every logit is -inf");
  double total = 0.0;
  for (std::size_t i = 0; i < keep; ++i) {
    probabilities_[i] = std::exp((logits[order_[i]] - top) / params_.temperature);
    total += probabilities_[i];
  }
  // Nucleus: the smallest prefix holding top_p of the probability.
  if (params_.top_p < 1.0f) {
    double cumulative = 0.0;
    for (std::size_t i = 0; i < keep; ++i) {
      cumulative += probabilities_[i];
      if (cumulative >= params_.top_p * total) {
        keep = i + 1;
        total = cumulative;
        break;
      }
    }
  }
  double target = next_uniform() * total;
  for (std::size_t i = 0; i < keep; ++i) {
    target -= probabilities_[i];
    if (target < 0.0) return order_[i];
  }
  return order_[keep - 1];
}

}  // namespace aft
