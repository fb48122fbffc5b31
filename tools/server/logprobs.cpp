#include "tools/server/logprobs.h"

#include <algorithm>
#include <numeric>

#include "tools/cli/log_softmax.h"

namespace aft::server {

LogprobScorer::LogprobScorer(const cli::Vocabulary& vocabulary)
    : vocabulary_(vocabulary),
      log_p_(static_cast<size_t>(vocabulary.size())),
      order_(static_cast<size_t>(vocabulary.size())) {}

TokenLogprob LogprobScorer::score(const float* logits, int32_t token, int32_t n_top) {
  cli::log_softmax(logits, log_p_.size(), log_p_.data());
  TokenLogprob scored;
  scored.chosen = {vocabulary_.text(token), log_p_[static_cast<size_t>(token)]};
  const size_t n = std::min(static_cast<size_t>(std::max(n_top, 0)), order_.size());
  if (n == 0) return scored;
  std::iota(order_.begin(), order_.end(), 0);
  std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(n), order_.end(),
                    [this](int32_t a, int32_t b) {
                      const double pa = log_p_[static_cast<size_t>(a)];
                      const double pb = log_p_[static_cast<size_t>(b)];
                      return pa > pb || (pa == pb && a < b);
                    });
  for (size_t i = 0; i < n; ++i) {
    scored.top.push_back({vocabulary_.text(order_[i]), log_p_[static_cast<size_t>(order_[i])]});
  }
  return scored;
}

}  // namespace aft::server
