#include "bpe_tokenizer.h"

#include <cstdio>
#include <queue>

#include "describe.h"
#include "error.h"
#include "gpt2_split.h"
#include "unicode.h"
#include "utf8.h"
#include "vocab_limit.h"

namespace aft {
namespace {

using nlohmann::json;

// GPT-2's bytes_to_unicode: printable bytes stand for themselves, the others for U+0100 onwards.
std::array<uint32_t, 256> byte_level_chars() {
  std::array<uint32_t, 256> chars{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    chars[b] = printable ? b : next++;
  }
  return chars;
}

std::string hex_byte(unsigned b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "<0x%02X>", b & 0xFFu);
  return buf;
}

// The code points of valid UTF-8.
std::vector<uint32_t> code_points(std::string_view text) {
  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size();) {
    const DecodedChar c = decode_utf8(text, pos);
    cps.push_back(c.code_point);
    pos += c.length;
  }
  return cps;
}

}  // namespace

void BpeTokenizer::AddedTrie::insert(const std::string& content, int32_t token) {
  uint32_t node = 0;
  for (const char ch : content) {
    const auto b = static_cast<uint8_t>(ch);
    const auto it = nodes[node].next.find(b);
    if (it != nodes[node].next.end()) {
      node = it->second;
    } else {
      nodes[node].next.emplace(b, static_cast<uint32_t>(nodes.size()));
      node = static_cast<uint32_t>(nodes.size());
      nodes.emplace_back();
    }
  }
  nodes[node].token = token;
}

std::pair<int32_t, std::size_t> BpeTokenizer::AddedTrie::match(std::string_view text,
                                                               std::size_t pos) const {
  std::pair<int32_t, std::size_t> best{-1, 0};
  uint32_t node = 0;
  for (std::size_t i = pos; i < text.size(); ++i) {
    const auto it = nodes[node].next.find(static_cast<uint8_t>(text[i]));
    if (it == nodes[node].next.end()) break;
    node = it->second;
    if (nodes[node].token >= 0) best = {nodes[node].token, i + 1 - pos};
  }
  return best;
}

BpeTokenizer BpeTokenizer::from_json(const json& d, const std::string& where) {
  const auto fail = [&](const std::string& what) {
    throw Error(AFT_ERR_FORMAT, where + ": tokenizer" + what);
  };
  const auto flag = [&](const char* key) {
    const auto it = d.find(key);
    if (it == d.end()) return false;
    if (!it->is_boolean())
      fail(std::string(".") + key + ": expected true or false, found " + describe(*it));
    return it->get<bool>();
  };
  BpeTokenizer tok;
  tok.byte_fallback_ = flag("byte_fallback");
  tok.ignore_merges_ = flag("ignore_merges");

  const auto normalizer = d.find("normalizer");
  if (normalizer != d.end() && !normalizer->is_null()) {
    if (*normalizer != "nfc")
      fail(".normalizer: expected \"nfc\" or null, found " + describe(*normalizer));
    tok.nfc_ = true;
  }
  const auto pre = d.find("pre_tokenizer");
  if (pre == d.end()) fail(": missing key \"pre_tokenizer\"");
  if (*pre != "gpt2") fail(".pre_tokenizer: expected \"gpt2\", found " + describe(*pre));

  const auto vocab = d.find("vocab");
  if (vocab == d.end()) fail(": missing key \"vocab\" (a \"bpe\" tokenizer needs one)");
  if (!vocab->is_array()) fail(".vocab: expected an array of strings, found " + describe(*vocab));
  if (vocab->empty()) fail(".vocab: is empty");
  check_vocab_size(vocab->size(), fail);
  const std::array<uint32_t, 256> chars = byte_level_chars();
  std::unordered_map<uint32_t, uint8_t> char_to_byte;
  for (int b = 0; b < 256; ++b) {
    char_to_byte.emplace(chars[b], static_cast<uint8_t>(b));
    append_utf8(tok.byte_chars_[b], chars[b]);
  }
  tok.pieces_.resize(vocab->size());
  tok.ids_.reserve(vocab->size());
  for (std::size_t i = 0; i < vocab->size(); ++i) {
    const json& entry = (*vocab)[i];
    const std::string slot = ".vocab[" + std::to_string(i) + "]";
    if (entry.is_null()) continue;
    if (!entry.is_string()) fail(slot + ": expected a string or null, found " + describe(entry));
    const std::string& token = entry.get_ref<const std::string&>();
    if (token.empty()) fail(slot + ": is empty");
    const auto [it, inserted] = tok.ids_.emplace(token, static_cast<int32_t>(i));
    if (!inserted) {
      fail(slot + ": duplicate of tokenizer.vocab[" + std::to_string(it->second) + "] (" +
           json_quote(token) + ")");
    }
    // Its bytes: each character of the byte-level form stands for a byte; another character (in
    // a token no text produces) for its own UTF-8 bytes.
    std::string& piece = tok.pieces_[i];
    for (std::size_t pos = 0; pos < token.size();) {
      const DecodedChar c = decode_utf8(token, pos);
      if (c.length == 0) fail(slot + ": is not valid UTF-8");
      const auto byte = char_to_byte.find(c.code_point);
      if (byte != char_to_byte.end()) {
        piece.push_back(static_cast<char>(byte->second));
      } else {
        piece.append(token, pos, c.length);
      }
      pos += c.length;
    }
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = tok.ids_.find(tok.byte_chars_[b]);
    tok.byte_ids_[b] = it == tok.ids_.end() ? -1 : it->second;
    const auto fallback = tok.ids_.find(hex_byte(static_cast<unsigned>(b)));
    tok.fallback_ids_[b] = fallback == tok.ids_.end() ? -1 : fallback->second;
    if (tok.byte_fallback_ && fallback != tok.ids_.end()) {
      tok.pieces_[static_cast<std::size_t>(fallback->second)] =
          std::string(1, static_cast<char>(b));
    }
  }

  const auto merges = d.find("merges");
  if (merges == d.end()) fail(": missing key \"merges\"");
  if (!merges->is_array()) fail(".merges: expected an array of pairs, found " + describe(*merges));
  if (merges->size() > kMaxVocab)
    fail(".merges: more than " + std::to_string(kMaxVocab) + " entries");
  tok.merges_.reserve(merges->size());
  for (std::size_t i = 0; i < merges->size(); ++i) {
    const json& m = (*merges)[i];
    const std::string slot = ".merges[" + std::to_string(i) + "]";
    if (!m.is_array() || m.size() != 2 || !m[0].is_string() || !m[1].is_string()) {
      fail(slot + ": expected a pair of strings, found " + describe(m));
    }
    const std::string& left = m[0].get_ref<const std::string&>();
    const std::string& right = m[1].get_ref<const std::string&>();
    int32_t ids[3];
    const std::string parts[3] = {left, right, left + right};
    for (int k = 0; k < 3; ++k) {
      const auto it = tok.ids_.find(parts[k]);
      if (it == tok.ids_.end()) {
        fail(slot + ": " + json_quote(parts[k]) + (k == 2 ? " (the merge's result)" : "") +
             " is not in the vocabulary");
      }
      ids[k] = it->second;
    }
    const uint64_t key = static_cast<uint64_t>(ids[0]) << 32 | static_cast<uint32_t>(ids[1]);
    const auto [it, inserted] = tok.merges_.emplace(key, Merge{static_cast<int32_t>(i), ids[2]});
    if (!inserted) {
      fail(slot + ": duplicate of tokenizer.merges[" + std::to_string(it->second.rank) + "] (" +
           json_quote(left) + " " + json_quote(right) + ")");
    }
  }

  const auto added = d.find("added_tokens");
  if (added != d.end()) {
    if (!added->is_array()) fail(".added_tokens: expected an array, found " + describe(*added));
    std::unordered_map<int64_t, std::size_t> seen;
    for (std::size_t i = 0; i < added->size(); ++i) {
      const json& a = (*added)[i];
      const std::string slot = ".added_tokens[" + std::to_string(i) + "]";
      if (!a.is_object()) fail(slot + ": expected an object, found " + describe(a));
      const auto id = a.find("id");
      const auto content = a.find("content");
      if (id == a.end() || !id->is_number_integer()) fail(slot + ".id: expected an integer");
      if (content == a.end() || !content->is_string() ||
          content->get_ref<const std::string&>().empty()) {
        fail(slot + ".content: expected a non-empty string");
      }
      const int64_t value = id->get<int64_t>();
      if (value < 0 || static_cast<std::size_t>(value) >= tok.pieces_.size()) {
        fail(slot + ".id: " + std::to_string(value) + " is outside the vocabulary (size " +
             std::to_string(tok.pieces_.size()) + ")");
      }
      const auto [it, inserted] = seen.emplace(value, i);
      if (!inserted) {
        fail(slot + ".id: " + std::to_string(value) + " is also tokenizer.added_tokens[" +
             std::to_string(it->second) + "]");
      }
      std::string text = content->get<std::string>();
      if (invalid_utf8_at(text) != text.size()) fail(slot + ".content: is not valid UTF-8");
      tok.pieces_[static_cast<std::size_t>(value)] = text;
      const auto normalized = a.find("normalized");
      if (normalized != a.end() && !normalized->is_boolean()) {
        fail(slot + ".normalized: expected true or false, found " + describe(*normalized));
      }
      const bool is_normalized = normalized != a.end() && normalized->get<bool>();
      if (is_normalized && tok.nfc_) {
        text.clear();
        for (const uint32_t cp :
             unicode::nfc(code_points(content->get_ref<const std::string&>()))) {
          append_utf8(text, cp);
        }
      }
      (is_normalized ? tok.normalized_added_ : tok.raw_added_)
          .insert(text, static_cast<int32_t>(value));
    }
  }
  return tok;
}

template <typename OnText>
void BpeTokenizer::AddedTrie::split(std::string_view text, std::vector<int32_t>& out,
                                    const OnText& on_text) const {
  std::size_t start = 0;
  for (std::size_t pos = 0; pos < text.size() && !empty();) {
    const auto [token, length] = match(text, pos);
    if (token < 0) {
      ++pos;
      continue;
    }
    if (pos > start) on_text(text.substr(start, pos - start));
    out.push_back(token);
    pos += length;
    start = pos;
  }
  if (start < text.size()) on_text(text.substr(start));
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  const std::size_t invalid = invalid_utf8_at(text);
  if (invalid != text.size()) throw Error(AFT_ERR_TOKENIZE, invalid_utf8_message(text, invalid));
  std::vector<int32_t> out;
  // Added tokens that match the text as written, then the text between them normalized.
  raw_added_.split(text, out, [&](std::string_view span) {
    if (!nfc_) {
      encode_normalized(span, out);
      return;
    }
    std::string normalized;
    for (const uint32_t cp : unicode::nfc(code_points(span))) append_utf8(normalized, cp);
    encode_normalized(normalized, out);
  });
  return out;
}

void BpeTokenizer::encode_normalized(std::string_view text, std::vector<int32_t>& out) const {
  normalized_added_.split(text, out, [&](std::string_view span) {
    const std::vector<uint32_t> cps = code_points(span);
    std::string word;
    for (const auto& [begin, end] : gpt2_split(cps)) {
      word.clear();
      for (std::size_t i = begin; i < end; ++i) append_utf8(word, cps[i]);
      encode_word(word, out);
    }
  });
}

void BpeTokenizer::encode_word(const std::string& bytes, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    std::string form;
    for (const char ch : bytes) form += byte_chars_[static_cast<uint8_t>(ch)];
    const auto it = ids_.find(form);
    if (it != ids_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // The word's symbols as a linked list; merges applied lowest rank first, leftmost first among
  // equal ranks, from a heap of candidate pairs whose stale entries are skipped.
  struct Symbol {
    int32_t id;
    int32_t prev, next;
  };
  std::vector<Symbol> sym;
  sym.reserve(bytes.size());
  for (const char ch : bytes) {
    const auto b = static_cast<uint8_t>(ch);
    if (byte_ids_[b] >= 0) {
      sym.push_back({byte_ids_[b], 0, 0});
      continue;
    }
    // As Hugging Face's BPE: the UTF-8 bytes of the byte's character as <0xXX> tokens.
    const std::string& character = byte_chars_[b];
    bool found = byte_fallback_;
    for (const char c : character) found = found && fallback_ids_[static_cast<uint8_t>(c)] >= 0;
    if (!found) {
      throw Error(AFT_ERR_TOKENIZE, "byte " + hex_byte(b).substr(1, 4) +
                                        " has no token in the model's vocabulary" +
                                        (byte_fallback_ ? " (nor byte fallback tokens)" : ""));
    }
    for (const char c : character) sym.push_back({fallback_ids_[static_cast<uint8_t>(c)], 0, 0});
  }
  const auto n = static_cast<int32_t>(sym.size());
  for (int32_t i = 0; i < n; ++i) {
    sym[static_cast<std::size_t>(i)].prev = i - 1;
    sym[static_cast<std::size_t>(i)].next = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank, pos, left, right;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  const auto consider = [&](int32_t pos) {
    if (pos < 0) return;
    const int32_t next = sym[static_cast<std::size_t>(pos)].next;
    if (next < 0) return;
    const int32_t left = sym[static_cast<std::size_t>(pos)].id;
    const int32_t right = sym[static_cast<std::size_t>(next)].id;
    const auto it = merges_.find(static_cast<uint64_t>(left) << 32 | static_cast<uint32_t>(right));
    if (it != merges_.end()) heap.push({it->second.rank, pos, left, right});
  };
  for (int32_t i = 0; i < n; ++i) consider(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& s = sym[static_cast<std::size_t>(c.pos)];
    if (s.id != c.left || s.next < 0 || sym[static_cast<std::size_t>(s.next)].id != c.right)
      continue;
    const uint64_t key = static_cast<uint64_t>(c.left) << 32 | static_cast<uint32_t>(c.right);
    s.id = merges_.find(key)->second.result;
    Symbol& gone = sym[static_cast<std::size_t>(s.next)];
    gone.id = -1;
    s.next = gone.next;
    if (s.next >= 0) sym[static_cast<std::size_t>(s.next)].prev = c.pos;
    consider(s.prev);
    consider(c.pos);
  }
  for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = sym[static_cast<std::size_t>(i)].next) {
    out.push_back(sym[static_cast<std::size_t>(i)].id);
  }
}

}  // namespace aft
