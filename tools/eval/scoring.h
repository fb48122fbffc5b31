// The figures of aft-eval, summed over scored positions in double precision.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace aft::eval {

struct Totals {
  double nats = 0.0;       // -log P(next token), summed
  int64_t tokens = 0;      // positions scored
  int64_t characters = 0;  // characters of the scored tokens
  // With a reference model: KL(P_reference || P_model) in nats, and top-token agreements.
  double kld_sum = 0.0;
  double kld_max = 0.0;
  int64_t top1_agreements = 0;
};

// Scores rows of logits (n x vocab_size floats, row-major) against their target tokens.
class Scorer {
 public:
  explicit Scorer(int32_t vocab_size);

  // reference_logits: the same positions by the reference model, or nullptr.
  void add(const float* logits, const float* reference_logits, const int32_t* targets, size_t n);
  void count_characters(int64_t characters) { totals_.characters += characters; }
  const Totals& totals() const { return totals_; }

 private:
  size_t vocab_size_;
  std::vector<double> log_p_, log_q_;  // this model's and the reference's log-probabilities
  Totals totals_;
};

}  // namespace aft::eval
