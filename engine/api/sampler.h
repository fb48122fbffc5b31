// Picks the next token from logits through llama.cpp's chain:
//   1. logit bias: each entry's bias added to its token's logit (-inf bans the token);
//   2. penalties on the tokens of the history (TokenHistory): a positive logit divided by
//      repeat_penalty, a negative one multiplied, then frequency_penalty x the token's count and
//      presence_penalty subtracted;
//   3. top-k, 4. top-p, 5. min-p, all on the distribution at temperature 1 (softmax of the
//      biased and penalised logits): temperature does not change which tokens they keep;
//   6. temperature: the kept logits divided by it, softmax, and a draw.
// Temperature 0 is the argmax of the biased and penalised logits (the lowest id on a tie), which
// every filter keeps. The picked token joins the history, as llama.cpp's llama_sampler_sample does.
//
// Deterministic on every machine: scores and softmax in double (finite inputs cannot overflow
// there), ties broken by token id, and its own generator (splitmix64), no library distribution.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "aft.h"
#include "sampler_history.h"

namespace aft {

class Sampler {
 public:
  // Throws Error(AFT_ERR_INVALID_ARGUMENT) naming a bad parameter and its value.
  explicit Sampler(const aft_sampler_params& params);

  // logits: n_vocab values, read only. Throws Error for a NaN or +inf logit, a biased token outside
  // the vocabulary, or when every logit is -inf after the bias; the history and the generator are
  // then unchanged.
  int32_t sample(const float* logits, std::size_t n_vocab);

  // Adds token to the history without sampling. Tokens outside a later call's vocabulary are
  // kept but penalise nothing.
  void accept(int32_t token);

  // Empties the history and restarts the generator from the seed.
  void reset();

 private:
  void score(const float* logits, std::size_t n_vocab);
  void apply_penalties();
  void collect_candidates();
  int32_t most_likely() const;
  int32_t draw();
  bool more_likely(int32_t x, int32_t y) const;
  double next_uniform();  // [0, 1)

  aft_sampler_params params_;  // logit_bias cleared: biases_ holds the copy
  std::vector<aft_logit_bias> biases_;
  TokenHistory history_;
  uint64_t rng_state_;
  std::vector<double> scores_;       // the logits after bias and penalties
  std::vector<int32_t> candidates_;  // tokens with a finite score, the kept ones first once sorted
  std::vector<double> weights_;
};

}  // namespace aft
