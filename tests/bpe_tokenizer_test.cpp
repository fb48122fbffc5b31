// Byte-level BPE (engine/format/bpe_tokenizer.h): the GPT-2 split, merges by rank, added tokens,
// NFC, byte fallback, the refusals of bad descriptions, and long inputs. The token-for-token
// comparison with Hugging Face's tokenizer is tests/python/test_tokenizer_reference.py.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "engine/format/error.h"
#include "engine/format/gpt2_split.h"
#include "engine/format/tokenizer.h"
#include "engine/format/utf8.h"

namespace {

using nlohmann::json;

// GPT-2's byte-level character of each byte.
std::string byte_char(int b) {
  const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
  uint32_t cp = static_cast<uint32_t>(b);
  if (!printable) {
    cp = 256;
    for (int k = 0; k < b; ++k) {
      if (!((k >= 33 && k <= 126) || (k >= 161 && k <= 172) || k >= 174)) ++cp;
    }
  }
  std::string s;
  aft::append_utf8(s, cp);
  return s;
}

// ids 0..255: the bytes' characters; then `extra`.
json bpe(const std::vector<std::string>& extra,
         const std::vector<std::pair<std::string, std::string>>& merges,
         json added = json::array()) {
  json vocab = json::array();
  for (int b = 0; b < 256; ++b) vocab.push_back(byte_char(b));
  for (const std::string& t : extra) vocab.push_back(t);
  json m = json::array();
  for (const auto& [l, r] : merges) m.push_back({l, r});
  return {{"type", "bpe"},  {"normalizer", "nfc"}, {"pre_tokenizer", "gpt2"},
          {"vocab", vocab}, {"merges", m},         {"added_tokens", added}};
}

aft::Tokenizer load(const json& d) { return aft::Tokenizer::from_json(d, "model.aft"); }

std::vector<int32_t> bytes_of(const std::string& text) {
  std::vector<int32_t> ids;
  for (const char c : text) ids.push_back(static_cast<uint8_t>(c));
  return ids;
}

std::string decode(const aft::Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::string out;
  for (const int32_t id : ids) out += tok.piece(id);
  return out;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<uint32_t> cps;
  for (std::size_t pos = 0; pos < text.size();) {
    const aft::DecodedChar c = aft::decode_utf8(text, pos);
    cps.push_back(c.code_point);
    pos += c.length;
  }
  std::vector<std::string> pieces;
  for (const auto& [begin, end] : aft::gpt2_split(cps)) {
    std::string piece;
    for (std::size_t i = begin; i < end; ++i) aft::append_utf8(piece, cps[i]);
    pieces.push_back(piece);
  }
  return pieces;
}

template <typename F>
std::string error_of(F&& call, aft_status status) {
  try {
    call();
  } catch (const aft::Error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

using Pieces = std::vector<std::string>;

TEST(Gpt2Split, FollowsTheRegex) {
  EXPECT_EQ(split("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split("it's we'll 'Sa"), (Pieces{"it", "'s", " we", "'ll", " '", "Sa"}));
  EXPECT_EQ(split("a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(split("a \n\n b"), (Pieces{"a", " \n\n", " b"}));
  EXPECT_EQ(split("a\n\nb"), (Pieces{"a", "\n", "\n", "b"}));
  EXPECT_EQ(split("x  "), (Pieces{"x", "  "}));
  EXPECT_EQ(split("x1234 5!!?"), (Pieces{"x", "1234", " 5", "!!?"}));
  EXPECT_EQ(split(" !a"), (Pieces{" !", "a"}));
  EXPECT_EQ(split("caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87"),
            (Pieces{"caf\xc3\xa9", " \xe4\xb8\xad\xe6\x96\x87"}));
  EXPECT_EQ(split("\xc2\xbd\xe2\x85\xab"), (Pieces{"\xc2\xbd\xe2\x85\xab"}));  // numbers (No, Nl)
  EXPECT_TRUE(split("").empty());
}

TEST(BpeTokenizer, MergesByRank) {
  // "ab" before "bc" by rank: "abc" is ab + c even though bc is a merge too.
  const aft::Tokenizer tok =
      load(bpe({"ab", "bc", "abc", "aa"}, {{"a", "b"}, {"b", "c"}, {"ab", "c"}, {"a", "a"}}));
  EXPECT_STREQ(tok.kind(), "bpe");
  EXPECT_EQ(tok.vocab_size(), 260u);
  EXPECT_EQ(tok.encode("abc"), (std::vector<int32_t>{258}));
  EXPECT_EQ(tok.encode("bc"), (std::vector<int32_t>{257}));
  // Equal ranks merge leftmost first.
  EXPECT_EQ(tok.encode("aaa"), (std::vector<int32_t>{259, 'a'}));
  EXPECT_EQ(tok.encode("aaaa"), (std::vector<int32_t>{259, 259}));
  // The split keeps merges inside words: " ab" is a space piece's byte then ab.
  const std::string space = byte_char(' ');
  EXPECT_EQ(tok.encode("x ab"), (std::vector<int32_t>{'x', ' ', 256}));
  EXPECT_EQ(decode(tok, tok.encode("x ab\n")), "x ab\n");
  EXPECT_TRUE(tok.encode("").empty());
}

TEST(BpeTokenizer, EveryByteOfUtf8RoundTrips) {
  const aft::Tokenizer tok = load(bpe({}, {}));
  const std::string text = "h\xc3\xa9llo \xf0\x9f\x98\x80 \xe4\xb8\xad\t\n";
  EXPECT_EQ(tok.encode(text), bytes_of(text));
  EXPECT_EQ(decode(tok, tok.encode(text)), text);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(tok.piece(b), std::string(1, static_cast<char>(b)));
}

TEST(BpeTokenizer, NormalizesToNfc) {
  const aft::Tokenizer tok = load(bpe({}, {}));
  // e + combining acute becomes U+00E9; the angstrom sign becomes U+00C5.
  EXPECT_EQ(tok.encode("e\xcc\x81"), bytes_of("\xc3\xa9"));
  EXPECT_EQ(tok.encode("\xe2\x84\xab"), bytes_of("\xc3\x85"));
  json d = bpe({}, {});
  d["normalizer"] = nullptr;
  EXPECT_EQ(load(d).encode("e\xcc\x81"), bytes_of("e\xcc\x81"));
}

TEST(BpeTokenizer, AddedTokensMatchBeforeTheSplit) {
  const json added = {
      {{"id", 256}, {"content", "<|end|>"}, {"special", true}, {"normalized", false}},
      {{"id", 257}, {"content", "<|end|>x"}, {"normalized", false}},
      {{"id", 258}, {"content", "\xc3\xa9!"}, {"normalized", true}}};
  const aft::Tokenizer tok = load(bpe({"<|end|>", "<|end|>x", "\xc3\xa9!"}, {}, added));
  EXPECT_EQ(tok.encode("a<|end|>b"), (std::vector<int32_t>{'a', 256, 'b'}));
  EXPECT_EQ(tok.encode("<|end|>x<|end|>"), (std::vector<int32_t>{257, 256}));  // longest
  EXPECT_EQ(tok.encode("<|end|"), bytes_of("<|end|"));
  // A normalized added token matches the text after NFC.
  EXPECT_EQ(tok.encode("e\xcc\x81!"), (std::vector<int32_t>{258}));
  EXPECT_EQ(tok.piece(256), "<|end|>");
  EXPECT_EQ(decode(tok, tok.encode("a<|end|>b")), "a<|end|>b");
}

TEST(BpeTokenizer, UnusedIdsDecodeToNothing) {
  json d = bpe({}, {});
  d["vocab"].push_back(nullptr);
  const aft::Tokenizer tok = load(d);
  EXPECT_EQ(tok.vocab_size(), 257u);
  EXPECT_EQ(tok.piece(256), "");
  EXPECT_EQ(error_of([&] { tok.piece(257); }, AFT_ERR_OUT_OF_RANGE),
            "token 257 is outside the vocabulary (size 257)");
}

TEST(BpeTokenizer, ByteWithoutTokenAndByteFallback) {
  json d = bpe({"<0xC4>", "<0x80>"}, {});
  d["vocab"][0] = "unused";  // byte 0's character U+0100 (C4 80) is gone
  EXPECT_EQ(error_of([&] { load(d).encode(std::string("a\0", 2)); }, AFT_ERR_TOKENIZE),
            "byte 0x00 has no token in the model's vocabulary");
  d["byte_fallback"] = true;
  const aft::Tokenizer tok = load(d);
  // As Hugging Face: the UTF-8 bytes of the byte's character, as <0xXX> tokens.
  EXPECT_EQ(tok.encode(std::string("a\0", 2)), (std::vector<int32_t>{'a', 256, 257}));
  EXPECT_EQ(tok.piece(256), "\xc4");
}

TEST(BpeTokenizer, IgnoreMerges) {
  json d = bpe({"ab", "abc"}, {{"a", "b"}});
  EXPECT_EQ(load(d).encode("abc"), (std::vector<int32_t>{256, 'c'}));
  d["ignore_merges"] = true;
  EXPECT_EQ(load(d).encode("abc"), (std::vector<int32_t>{257}));
}

TEST(BpeTokenizer, InvalidUtf8IsRefused) {
  const aft::Tokenizer tok = load(bpe({}, {}));
  EXPECT_EQ(error_of([&] { tok.encode("ab\xff"); }, AFT_ERR_TOKENIZE),
            "text is not valid UTF-8: byte 0xff at byte 2 does not start a well-formed character");
  EXPECT_NE(error_of([&] { tok.encode("\xe4\xb8"); }, AFT_ERR_TOKENIZE).find("byte 0xe4 at byte 0"),
            std::string::npos);
}

TEST(BpeTokenizer, BadDescriptionsNameTheEntry) {
  const auto refused = [](const json& d) { return error_of([&] { load(d); }, AFT_ERR_FORMAT); };
  json d = bpe({"ab"}, {{"a", "b"}, {"a", "b"}});
  EXPECT_EQ(refused(d),
            "model.aft: tokenizer.merges[1]: duplicate of tokenizer.merges[0] (\"a\" \"b\")");
  d = bpe({}, {{"a", "b"}});
  EXPECT_EQ(refused(d),
            "model.aft: tokenizer.merges[0]: \"ab\" (the merge's result) is not in the vocabulary");
  d = bpe({}, {{"a", "zz"}});
  EXPECT_EQ(refused(d), "model.aft: tokenizer.merges[0]: \"zz\" is not in the vocabulary");
  d = bpe({"a"}, {});
  EXPECT_EQ(refused(d),
            "model.aft: tokenizer.vocab[256]: duplicate of tokenizer.vocab[97] (\"a\")");
  d = bpe({}, {});
  d["pre_tokenizer"] = "metaspace";
  EXPECT_EQ(refused(d),
            "model.aft: tokenizer.pre_tokenizer: expected \"gpt2\", found string \"metaspace\"");
  d = bpe({}, {});
  d["normalizer"] = "nfkc";
  EXPECT_EQ(refused(d),
            "model.aft: tokenizer.normalizer: expected \"nfc\" or null, found string \"nfkc\"");
  d = bpe({}, {}, {{{"id", 256}, {"content", "x"}}});
  EXPECT_EQ(refused(d),
            "model.aft: tokenizer.added_tokens[0].id: 256 is outside the vocabulary (size 256)");
  d = bpe({}, {}, {{{"id", 3}, {"content", "x"}}, {{"id", 3}, {"content", "y"}}});
  EXPECT_EQ(refused(d),
            "model.aft: tokenizer.added_tokens[1].id: 3 is also tokenizer.added_tokens[0]");
  d = bpe({}, {});
  d["merges"] = json::array({json::array({"a"})});
  EXPECT_EQ(refused(d),
            "model.aft: tokenizer.merges[0]: expected a pair of strings, found an array");
  d = bpe({}, {});
  d.erase("vocab");
  EXPECT_EQ(refused(d),
            "model.aft: tokenizer: missing key \"vocab\" (a \"bpe\" tokenizer needs one)");
}

TEST(BpeTokenizer, LongWordsStayFast) {
  // Merges that chain over a whole word: a heap keeps it O(n log n); a rescan per merge would be
  // quadratic. No time is asserted; the test's time shows it.
  const aft::Tokenizer tok =
      load(bpe({"aa", "aaaa", "aaaaaaaa"}, {{"a", "a"}, {"aa", "aa"}, {"aaaa", "aaaa"}}));
  const std::string word(100000, 'a');
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tok.encode(word);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(ids.size(), 100000u / 8);
  EXPECT_EQ(decode(tok, ids), word);
  std::printf("a 100,000-character word: %.1f ms\n", ms);
}

TEST(BpeTokenizer, LargeVocabularyLoads) {
  // 50,000 merges over 50,256 tokens, as GPT-NeoX's; the load time is printed, not asserted.
  // Each merge appends one character to an earlier token, so every result is a new string.
  std::vector<std::string> extra;
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<std::string> pool;
  for (int b = 0; b < 256; ++b) pool.push_back(byte_char(b));
  for (std::size_t i = 0; merges.size() < 50000; ++i) {
    for (const int r : {'e', 't', 'a', ' '}) {
      const std::string right = byte_char(r);
      pool.push_back(pool[i] + right);
      extra.push_back(pool.back());
      merges.emplace_back(pool[i], right);
    }
  }
  const json d = bpe(extra, merges);
  const std::string text = d.dump();
  const auto start = std::chrono::steady_clock::now();
  const aft::Tokenizer tok = load(json::parse(text));
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("%zu tokens, %zu merges: parsed and loaded in %.1f ms (%.1f MB of JSON)\n",
              tok.vocab_size(), merges.size(), ms, static_cast<double>(text.size()) / 1e6);
  EXPECT_GE(tok.vocab_size(), 50000u);
}

}  // namespace
