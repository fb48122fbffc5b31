#include "sampler_history.h"

namespace aft {

TokenHistory::TokenHistory(int32_t window) : window_(window) {}

void TokenHistory::record(int32_t token) {
  if (window_ == 0) return;
  ++counts_[token];
  if (window_ < 0) return;  // every token counts until the clear: no ring to keep
  if (ring_.size() < static_cast<std::size_t>(window_)) {
    ring_.push_back(token);
    return;
  }
  forget_oldest();
  ring_[oldest_] = token;
  oldest_ = (oldest_ + 1) % ring_.size();
}

void TokenHistory::forget_oldest() {
  const auto entry = counts_.find(ring_[oldest_]);
  if (--entry->second == 0) counts_.erase(entry);
}

void TokenHistory::clear() {
  ring_.clear();
  oldest_ = 0;
  counts_.clear();
}

}  // namespace aft
