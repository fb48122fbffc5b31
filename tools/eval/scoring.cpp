#include "tools/eval/scoring.h"

#include <algorithm>
#include <cmath>

namespace aft::eval {
namespace {

// Writes the log-softmax of a row in double; returns the index of its largest logit (the first
// one on a tie).
size_t log_softmax(const float* logits, size_t n, double* out) {
  const size_t top = static_cast<size_t>(std::max_element(logits, logits + n) - logits);
  const double peak = logits[top];
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - peak);
  const double log_total = peak + std::log(sum);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<double>(logits[i]) - log_total;
  return top;
}

}  // namespace

Scorer::Scorer(int32_t vocab_size)
    : vocab_size_(static_cast<size_t>(vocab_size)), log_p_(vocab_size_), log_q_(vocab_size_) {}

void Scorer::add(const float* logits, const float* reference_logits, const int32_t* targets,
                 size_t n) {
  for (size_t row = 0; row < n; ++row) {
    const size_t top = log_softmax(logits + row * vocab_size_, vocab_size_, log_p_.data());
    totals_.nats -= log_p_[static_cast<size_t>(targets[row])];
    ++totals_.tokens;
    if (reference_logits == nullptr) continue;
    const size_t reference_top =
        log_softmax(reference_logits + row * vocab_size_, vocab_size_, log_q_.data());
    double kld = 0.0;
    for (size_t i = 0; i < vocab_size_; ++i) kld += std::exp(log_q_[i]) * (log_q_[i] - log_p_[i]);
    totals_.kld_sum += kld;
    totals_.kld_max = std::max(totals_.kld_max, kld);
    if (top == reference_top) ++totals_.top1_agreements;
  }
}

}  // namespace aft::eval
