#include "tools/eval/scoring.h"

#include <algorithm>
#include <cmath>

#include "tools/cli/log_softmax.h"

namespace aft::eval {
using cli::log_softmax;

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
