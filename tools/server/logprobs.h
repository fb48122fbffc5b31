// OpenAI's `logprobs`: each generated token's log-probability under the model's own distribution
// (its raw logits: before temperature, penalties, bias and filters, as OpenAI reports them), and
// the most likely tokens at that step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tools/cli/vocabulary.h"

namespace aft::server {

struct TokenLogprob {
  struct Candidate {
    std::string text;  // the token's bytes (part of a character, maybe)
    double logprob = 0.0;
  };
  Candidate chosen;
  bool scored = true;          // false: an echoed prompt's first token, which nothing predicts
  std::vector<Candidate> top;  // most likely first; equal ones by token id
  int64_t text_offset = 0;     // characters of the prompt and completion before this token
};

// Scores tokens against rows of logits; holds the scratch of one row (one per slot).
class LogprobScorer {
 public:
  explicit LogprobScorer(const cli::Vocabulary& vocabulary);

  // token's log-probability under logits (vocabulary-size floats) and the n_top likeliest tokens.
  TokenLogprob score(const float* logits, int32_t token, int32_t n_top);

 private:
  const cli::Vocabulary& vocabulary_;
  std::vector<double> log_p_;
  std::vector<int32_t> order_;
};

}  // namespace aft::server
