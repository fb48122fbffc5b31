// The model's tokenizer, of each kind docs/format.md ("tokenizer") describes: bytes, characters,
// byte-level BPE (bpe_tokenizer.h) or the RWKV World vocabulary (world_tokenizer.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "bpe_tokenizer.h"
#include "world_tokenizer.h"

namespace aft {

class Tokenizer {
 public:
  // Throws Error(AFT_ERR_FORMAT) naming `where` (the file) for a bad tokenizer description.
  static Tokenizer from_json(const nlohmann::json& description, const std::string& where);

  std::size_t vocab_size() const;
  // "byte", "char", "bpe" or "world", as the file names it.
  const char* kind() const;
  // Throws Error(AFT_ERR_TOKENIZE) naming the character or byte and its offset (invalid UTF-8 for
  // a character or BPE vocabulary, or text the vocabulary cannot represent).
  std::vector<int32_t> encode(std::string_view text) const;
  // The bytes of one token (none for an id with no token: a World model's end of text, padding);
  // throws Error(AFT_ERR_OUT_OF_RANGE) for an id outside the vocabulary.
  const std::string& piece(int32_t token) const;
  // The token that ends a text (docs/format.md, "tokenizer"): a World vocabulary's 0, or the file's
  // "end_of_text"; none for a tokenizer that has no such token.
  std::optional<int32_t> end_of_text() const { return end_of_text_; }

 private:
  enum class Kind { kByte, kChar, kBpe, kWorld };
  Kind kind_ = Kind::kByte;
  bool byte_level_ = true;
  std::vector<std::string> pieces_;
  // Shared: a Tokenizer is copied, and these are large and never change.
  std::shared_ptr<const BpeTokenizer> bpe_;
  std::shared_ptr<const WorldTokenizer> world_;
  std::unordered_map<uint32_t, int32_t> code_point_to_token_;
  std::optional<int32_t> end_of_text_;

  static Tokenizer read_vocabulary(const nlohmann::json& description, const std::string& where);
  void read_end_of_text(const nlohmann::json& description, const std::string& where);
};

}  // namespace aft
