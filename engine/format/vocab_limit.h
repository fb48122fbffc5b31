// The most entries a tokenizer description's vocabulary or merge list may have: token ids are
// int32, and a bound checked before anything is built keeps a corrupt file from asking for
// unbounded memory.
#pragma once

#include <cstddef>
#include <string>

namespace aft {

constexpr std::size_t kMaxVocab = std::size_t{1} << 24;

// Calls fail(".vocab: N entries, more than the limit M") for a vocabulary over the limit.
template <typename Fail>
void check_vocab_size(std::size_t entries, const Fail& fail) {
  if (entries > kMaxVocab) {
    fail(".vocab: " + std::to_string(entries) + " entries, more than the limit " +
         std::to_string(kMaxVocab));
  }
}

}  // namespace aft
