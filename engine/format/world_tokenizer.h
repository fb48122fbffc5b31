// The RWKV World vocabulary: tokens of arbitrary bytes, text encoded by greedy longest match over
// its bytes as RWKV's TRIE_TOKENIZER does (docs/format.md, "tokenizer").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace aft {

class WorldTokenizer {
 public:
  // Throws Error(AFT_ERR_FORMAT) naming `where` and the entry for a bad description.
  static WorldTokenizer from_json(const nlohmann::json& description, const std::string& where);

  std::size_t vocab_size() const { return pieces_.size(); }
  // Throws Error(AFT_ERR_TOKENIZE) naming the byte where no token matches.
  std::vector<int32_t> encode(std::string_view text) const;
  const std::string& piece(int32_t token) const { return pieces_[static_cast<std::size_t>(token)]; }

 private:
  std::vector<std::string> pieces_;
  // The trie: edge (node << 8 | byte) -> child node; the token ending at each node, -1 if none.
  std::unordered_map<uint64_t, uint32_t> edges_;
  std::vector<int32_t> node_token_{-1};
};

}  // namespace aft
