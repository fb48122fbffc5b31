// The GPT-2 pre-tokenizer split, hand-written: the pieces the regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// finds, as Hugging Face's ByteLevel pre-tokenizer (use_regex) applies it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace aft {

// [begin, end) of each piece of text (code points), in order; together they cover the text.
std::vector<std::pair<std::size_t, std::size_t>> gpt2_split(const std::vector<uint32_t>& text);

}  // namespace aft
