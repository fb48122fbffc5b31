// The tokens the sampler's penalties look at: the last `window` recorded, or every one since the
// last clear, each with its count among them. Recording and forgetting are O(1), so the penalties
// cost O(distinct tokens in the window) per sample whatever the length of the text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace aft {

class TokenHistory {
 public:
  // window > 0: the last window tokens; -1: every token since the clear; 0: records nothing.
  explicit TokenHistory(int32_t window);

  void record(int32_t token);
  void clear();

  // Each token in the window and how many times it occurs there (every count > 0).
  const std::unordered_map<int32_t, int64_t>& counts() const { return counts_; }

 private:
  void forget_oldest();

  int32_t window_;
  // The window as a ring, grown as tokens arrive (a huge window costs only what is recorded);
  // once full, oldest_ is the next slot to overwrite.
  std::vector<int32_t> ring_;
  std::size_t oldest_ = 0;
  std::unordered_map<int32_t, int64_t> counts_;
};

}  // namespace aft
