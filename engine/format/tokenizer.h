// Byte-level and character-vocabulary tokenizers (docs/format.md, "tokenizer").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace aft {

class Tokenizer {
 public:
  // Throws Error(AFT_ERR_FORMAT) naming `where` (the file) for a bad tokenizer description.
  static Tokenizer from_json(const nlohmann::json& description, const std::string& where);

  std::size_t vocab_size() const { return pieces_.size(); }
  // "byte" or "char", as the file names it.
  const char* kind() const { return byte_level_ ? "byte" : "char"; }
  // Throws Error(AFT_ERR_TOKENIZE) naming the character and its byte offset (invalid UTF-8 for a
  // character vocabulary, or a character outside it).
  std::vector<int32_t> encode(std::string_view text) const;
  // The bytes of one token; throws Error(AFT_ERR_OUT_OF_RANGE) for an id outside the vocabulary.
  const std::string& piece(int32_t token) const;

 private:
  bool byte_level_ = true;
  std::vector<std::string> pieces_;
  std::unordered_map<uint32_t, int32_t> code_point_to_token_;
};

}  // namespace aft
