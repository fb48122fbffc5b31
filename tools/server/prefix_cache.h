// Saved session states keyed by the tokens that led to them: a request whose tokens start with a
// cached sequence restores its state and evaluates only the rest. Least recently used entries go
// first when the byte budget is exceeded. Changed by the scheduler's thread only; the HTTP handlers
// ask how long a prefix it holds (longest_prefix_length), the counters are read by /metrics.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tools/cli/prefix_state.h"

namespace aft::server {

class PrefixCache {
 public:
  // The logits are the last token's: a full hit needs no evaluation.
  using Entry = cli::PrefixState;

  explicit PrefixCache(size_t budget_bytes) : budget_(budget_bytes) {}

  bool enabled() const { return budget_ > 0; }

  // The longest cached sequence that tokens starts with (at most max_length tokens), or null. The
  // pointer is valid until the next insert. counted: a request's lookup, in hits or misses.
  const Entry* longest_prefix(const std::vector<int32_t>& tokens, size_t max_length,
                              bool counted = true);

  // The length of that entry (0 for none), from any thread, changing nothing: what a lookup in
  // the shared cache must beat.
  size_t longest_prefix_length(const std::vector<int32_t>& tokens) const;

  // Keeps an entry (replacing one with the same tokens); one larger than the budget is dropped.
  void insert(Entry entry);

  std::atomic<uint64_t> hits{0}, misses{0};
  std::atomic<uint64_t> bytes_used{0}, entries{0};

 private:
  using List = std::list<Entry>;
  void evict_to(size_t budget);

  size_t budget_;
  // Held by the scheduler's thread while it changes the entries, and by the others while they
  // read them (the scheduler's own reads need none).
  mutable std::mutex mutex_;
  List lru_;  // most recent first
  std::unordered_multimap<uint64_t, List::iterator> by_hash_;
};

// FNV-1a over token ids, extended one token at a time: the hash of every prefix in one pass.
inline uint64_t extend_hash(uint64_t hash, int32_t token) {
  uint32_t bits = static_cast<uint32_t>(token);
  for (int byte = 0; byte < 4; ++byte, bits >>= 8) {
    hash ^= bits & 0xFFu;
    hash *= 0x100000001B3ull;
  }
  return hash;
}
constexpr uint64_t kEmptyHash = 0xCBF29CE484222325ull;

// The hash of a whole sequence, as entries are keyed.
inline uint64_t tokens_hash(const std::vector<int32_t>& tokens) {
  uint64_t hash = kEmptyHash;
  for (int32_t token : tokens) hash = extend_hash(hash, token);
  return hash;
}

// The hashes of the first n tokens' prefixes: [i] is that of the first i tokens.
inline std::vector<uint64_t> prefix_hashes(const std::vector<int32_t>& tokens, size_t n) {
  std::vector<uint64_t> hashes(n + 1);
  hashes[0] = kEmptyHash;
  for (size_t i = 0; i < n; ++i) hashes[i + 1] = extend_hash(hashes[i], tokens[i]);
  return hashes;
}

}  // namespace aft::server
