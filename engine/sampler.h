// Picks the next token from logits: greedy, or temperature with top-k and top-p (nucleus)
// filtering. Deterministic: its own random generator, no platform-dependent distributions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "aft.h"

namespace aft {

class Sampler {
 public:
  // Throws Error(AFT_ERR_INVALID_ARGUMENT) naming a bad parameter.
  explicit Sampler(const aft_sampler_params& params);

  // Throws Error(AFT_ERR_INVALID_ARGUMENT) for NaN or +inf logits, all -inf, or no logits.
  int32_t sample(const float* logits, std::size_t n_vocab);

 private:
  double next_uniform();  // [0, 1)

  aft_sampler_params params_;
  uint64_t rng_state_;
  std::vector<int32_t> order_;
  std::vector<double> probabilities_;
};

}  // namespace aft
