#include "tools/server/prefix_cache.h"

#include <algorithm>
#include <iterator>

namespace aft::server {

const PrefixCache::Entry* PrefixCache::longest_prefix(const std::vector<int32_t>& tokens,
                                                      size_t max_length, bool counted) {
  if (!enabled()) return nullptr;
  const size_t n = std::min(tokens.size(), max_length);
  const std::vector<uint64_t> hashes = prefix_hashes(tokens, n);
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t length = n; length > 0; --length) {
    auto [first, last] = by_hash_.equal_range(hashes[length]);
    for (auto it = first; it != last; ++it) {
      const Entry& entry = *it->second;
      // The hash only finds candidates: the tokens themselves decide.
      if (entry.tokens.size() == length &&
          std::equal(entry.tokens.begin(), entry.tokens.end(), tokens.begin())) {
        lru_.splice(lru_.begin(), lru_, it->second);
        if (counted) ++hits;
        return &lru_.front();
      }
    }
  }
  if (counted) ++misses;
  return nullptr;
}

size_t PrefixCache::longest_prefix_length(const std::vector<int32_t>& tokens) const {
  if (!enabled()) return 0;
  const std::vector<uint64_t> hashes = prefix_hashes(tokens, tokens.size());
  // The lock is taken for a batch of lengths at a time: a long prompt's probes (a few ms for
  // 100,000 tokens) never hold up the scheduler's thread for long.
  constexpr size_t kBatch = 4096;
  for (size_t end = tokens.size(); end > 0;) {
    const size_t begin = end > kBatch ? end - kBatch : 0;
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t length = end; length > begin; --length) {
      auto [first, last] = by_hash_.equal_range(hashes[length]);
      for (auto it = first; it != last; ++it) {
        const Entry& entry = *it->second;
        if (entry.tokens.size() == length &&
            std::equal(entry.tokens.begin(), entry.tokens.end(), tokens.begin())) {
          return length;
        }
      }
    }
    end = begin;
  }
  return 0;
}

void PrefixCache::insert(Entry entry) {
  if (!enabled() || entry.bytes() > budget_) return;
  const uint64_t hash = tokens_hash(entry.tokens);
  std::lock_guard<std::mutex> lock(mutex_);
  auto [first, last] = by_hash_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    if (it->second->tokens == entry.tokens) {
      bytes_used -= it->second->bytes();
      lru_.erase(it->second);
      by_hash_.erase(it);
      --entries;
      break;
    }
  }
  evict_to(budget_ - entry.bytes());
  bytes_used += entry.bytes();
  ++entries;
  lru_.push_front(std::move(entry));
  by_hash_.emplace(hash, lru_.begin());
}

void PrefixCache::evict_to(size_t budget) {
  while (!lru_.empty() && bytes_used > budget) {
    const Entry& victim = lru_.back();
    auto [first, last] = by_hash_.equal_range(tokens_hash(victim.tokens));
    for (auto it = first; it != last; ++it) {
      if (it->second == std::prev(lru_.end())) {
        by_hash_.erase(it);
        break;
      }
    }
    bytes_used -= victim.bytes();
    --entries;
    lru_.pop_back();
  }
}

}  // namespace aft::server
