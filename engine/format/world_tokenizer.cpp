#include "world_tokenizer.h"

#include <cstdio>

#include "describe.h"
#include "error.h"
#include "vocab_limit.h"

namespace aft {
namespace {

using nlohmann::json;

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

WorldTokenizer WorldTokenizer::from_json(const json& d, const std::string& where) {
  const auto fail = [&](const std::string& what) {
    throw Error(AFT_ERR_FORMAT, where + ": tokenizer" + what);
  };
  const auto vocab = d.find("vocab");
  if (vocab == d.end()) fail(": missing key \"vocab\" (a \"world\" tokenizer needs one)");
  if (!vocab->is_array())
    fail(".vocab: expected an array of hex strings, found " + describe(*vocab));
  if (vocab->empty()) fail(".vocab: is empty");
  check_vocab_size(vocab->size(), fail);
  if (!(*vocab)[0].is_null()) fail(".vocab[0]: expected null (token 0 is the end of text)");
  WorldTokenizer tok;
  tok.pieces_.resize(vocab->size());
  for (std::size_t i = 1; i < vocab->size(); ++i) {
    const json& entry = (*vocab)[i];
    if (entry.is_null()) continue;
    const std::string slot = ".vocab[" + std::to_string(i) + "]";
    if (!entry.is_string())
      fail(slot + ": expected a hex string or null, found " + describe(entry));
    const std::string& hex = entry.get_ref<const std::string&>();
    if (hex.empty() || hex.size() % 2 != 0) {
      fail(slot + ": expected a non-empty even number of hex digits, found " + describe(entry));
    }
    std::string& piece = tok.pieces_[i];
    uint32_t node = 0;
    for (std::size_t k = 0; k < hex.size(); k += 2) {
      const int hi = hex_digit(hex[k]), lo = hex_digit(hex[k + 1]);
      if (hi < 0 || lo < 0) fail(slot + ": expected hex digits, found " + describe(entry));
      const auto byte = static_cast<uint8_t>(hi << 4 | lo);
      piece.push_back(static_cast<char>(byte));
      const uint64_t edge = static_cast<uint64_t>(node) << 8 | byte;
      const auto [it, inserted] =
          tok.edges_.emplace(edge, static_cast<uint32_t>(tok.node_token_.size()));
      if (inserted) tok.node_token_.push_back(-1);
      node = it->second;
    }
    int32_t& owner = tok.node_token_[node];
    if (owner >= 0) {
      fail(slot + ": duplicate of tokenizer.vocab[" + std::to_string(owner) + "] (" + hex + ")");
    }
    owner = static_cast<int32_t>(i);
  }
  return tok;
}

std::vector<int32_t> WorldTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> tokens;
  for (std::size_t pos = 0; pos < text.size();) {
    int32_t best = -1;
    std::size_t best_end = pos;
    uint32_t node = 0;
    for (std::size_t i = pos; i < text.size(); ++i) {
      const auto it = edges_.find(static_cast<uint64_t>(node) << 8 | static_cast<uint8_t>(text[i]));
      if (it == edges_.end()) break;
      node = it->second;
      if (node_token_[node] >= 0) {
        best = node_token_[node];
        best_end = i + 1;
      }
    }
    if (best < 0) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "0x%02x",
                    static_cast<unsigned>(static_cast<uint8_t>(text[pos])));
      throw Error(AFT_ERR_TOKENIZE, "byte " + std::string(buf) + " at byte " + std::to_string(pos) +
                                        " starts no token of the model's vocabulary");
    }
    tokens.push_back(best);
    pos = best_end;
  }
  return tokens;
}

}  // namespace aft
