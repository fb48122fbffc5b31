// The RWKV World vocabulary (engine/format/world_tokenizer.h): greedy longest match over bytes,
// tokens that are not UTF-8, unused ids, and the refusals of bad descriptions. The comparison with
// a reference greedy match on a varied corpus is tests/python/test_tokenizer_reference.py.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/format/error.h"
#include "engine/format/tokenizer.h"

namespace {

using nlohmann::json;

aft::Tokenizer load(const json& d) { return aft::Tokenizer::from_json(d, "model.aft"); }

std::string refused(const json& vocab) {
  try {
    load(json{{"type", "world"}, {"vocab", vocab}});
  } catch (const aft::Error& e) {
    EXPECT_EQ(e.status(), AFT_ERR_FORMAT);
    return e.what();
  }
  ADD_FAILURE() << "accepted";
  return {};
}

// 1 "a", 2 "b", 3 "ab", 4 "abc", 5 e4 b8 (half of U+4E2D), 6 e4 b8 ad (U+4E2D), 7 ff, 8 unused.
const json kVocab = {nullptr, "61", "62", "6162", "616263", "e4b8", "E4B8AD", "ff", nullptr};

TEST(WorldTokenizer, GreedyLongestMatch) {
  const aft::Tokenizer tok = load(json{{"type", "world"}, {"vocab", kVocab}});
  EXPECT_STREQ(tok.kind(), "world");
  EXPECT_EQ(tok.vocab_size(), 9u);
  EXPECT_EQ(tok.encode("abcab"), (std::vector<int32_t>{4, 3}));
  // Longest match, not the best split: "abca" is abc + a.
  EXPECT_EQ(tok.encode("abca"), (std::vector<int32_t>{4, 1}));
  EXPECT_EQ(tok.encode("\xe4\xb8\xad\xe4\xb8\xff"), (std::vector<int32_t>{6, 5, 7}));
  EXPECT_TRUE(tok.encode("").empty());
  EXPECT_EQ(tok.piece(5), "\xe4\xb8");
  EXPECT_EQ(tok.piece(6), "\xe4\xb8\xad");
  EXPECT_EQ(tok.piece(0), "");  // the end of text
  EXPECT_EQ(tok.piece(8), "");  // an unused (padding) id
}

TEST(WorldTokenizer, ByteWithoutTokenIsRefused) {
  const aft::Tokenizer tok = load(json{{"type", "world"}, {"vocab", kVocab}});
  try {
    tok.encode("abz");
    ADD_FAILURE() << "no error";
  } catch (const aft::Error& e) {
    EXPECT_EQ(e.status(), AFT_ERR_TOKENIZE);
    EXPECT_STREQ(e.what(), "byte 0x7a at byte 2 starts no token of the model's vocabulary");
  }
}

TEST(WorldTokenizer, BadDescriptionsNameTheEntry) {
  EXPECT_EQ(refused({"61"}),
            "model.aft: tokenizer.vocab[0]: expected null (token 0 is the end of text)");
  EXPECT_EQ(refused({nullptr, "61", "62", "61"}),
            "model.aft: tokenizer.vocab[3]: duplicate of tokenizer.vocab[1] (61)");
  EXPECT_EQ(refused({nullptr, "6"}),
            "model.aft: tokenizer.vocab[1]: expected a non-empty even number of hex digits, found "
            "string \"6\"");
  EXPECT_EQ(refused({nullptr, ""}),
            "model.aft: tokenizer.vocab[1]: expected a non-empty even number of hex digits, found "
            "string \"\"");
  EXPECT_EQ(refused({nullptr, "6g"}),
            "model.aft: tokenizer.vocab[1]: expected hex digits, found string \"6g\"");
  EXPECT_EQ(refused({nullptr, 7}),
            "model.aft: tokenizer.vocab[1]: expected a hex string or null, found 7");
  EXPECT_EQ(refused(json::array()), "model.aft: tokenizer.vocab: is empty");
  EXPECT_EQ(refused("61"),
            "model.aft: tokenizer.vocab: expected an array of hex strings, found string \"61\"");
}

}  // namespace
