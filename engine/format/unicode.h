// The Unicode the BPE tokenizer needs: character classes of the GPT-2 split and NFC, from the
// tables tools/gen_unicode_tables.py generates (unicode_tables.cpp).
#pragma once

#include <cstdint>
#include <vector>

namespace aft::unicode {

bool is_letter(uint32_t cp);      // \p{L}
bool is_number(uint32_t cp);      // \p{N}
bool is_whitespace(uint32_t cp);  // White_Space, what \s matches in Hugging Face's Rust regex
uint8_t combining_class(uint32_t cp);

// Normalization Form C (UAX #15) of a sequence of code points.
std::vector<uint32_t> nfc(const std::vector<uint32_t>& text);

// The Unicode version of the tables.
const char* version();

}  // namespace aft::unicode
