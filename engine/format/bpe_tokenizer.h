// Byte-level BPE as GPT-2 and GPT-NeoX use it, from the "bpe" tokenizer description
// (docs/format.md, "tokenizer"): added tokens, NFC, the GPT-2 split, merges by rank.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace aft {

class BpeTokenizer {
 public:
  // Throws Error(AFT_ERR_FORMAT) naming `where` and the entry for a bad description.
  static BpeTokenizer from_json(const nlohmann::json& description, const std::string& where);

  std::size_t vocab_size() const { return pieces_.size(); }
  // Throws Error(AFT_ERR_TOKENIZE) for text that is not UTF-8 or that the vocabulary cannot
  // represent (a byte with no token and no byte fallback).
  std::vector<int32_t> encode(std::string_view text) const;
  // The bytes of a token (an unused id: none).
  const std::string& piece(int32_t token) const { return pieces_[static_cast<std::size_t>(token)]; }

 private:
  // Added tokens, matched leftmost-longest by a byte trie.
  struct AddedTrie {
    struct Node {
      std::unordered_map<uint8_t, uint32_t> next;
      int32_t token = -1;
    };
    std::vector<Node> nodes{1};
    void insert(const std::string& content, int32_t token);
    // The longest added token at text[pos]: {token, length}, or {-1, 0}.
    std::pair<int32_t, std::size_t> match(std::string_view text, std::size_t pos) const;
    bool empty() const { return nodes.size() == 1; }
    // The text cut at the added tokens: on_text(span) for the text between them, their ids to out.
    template <typename OnText>
    void split(std::string_view text, std::vector<int32_t>& out, const OnText& on_text) const;
  };
  struct Merge {
    int32_t rank, result;
  };

  void encode_normalized(std::string_view text, std::vector<int32_t>& out) const;
  void encode_word(const std::string& bytes, std::vector<int32_t>& out) const;

  std::vector<std::string> pieces_;
  std::unordered_map<std::string, int32_t> ids_;  // the byte-level form of each vocabulary token
  std::array<int32_t, 256> byte_ids_{};           // each byte's token, -1 if none
  std::array<int32_t, 256> fallback_ids_{};       // each <0xXX> token, -1 if none
  std::array<std::string, 256> byte_chars_;       // each byte's character in the byte-level form
  std::unordered_map<uint64_t, Merge> merges_;    // (left << 32 | right) -> rank, result
  AddedTrie raw_added_, normalized_added_;
  bool nfc_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
};

}  // namespace aft
