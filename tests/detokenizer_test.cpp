// aft_detokenizer (aft.h): tokens to valid UTF-8 as they come, characters that span tokens held
// until complete, ill-formed bytes as U+FFFD; its buffer protocol and NULL checks. Also
// aft_token_to_text and aft_tokenize on BPE and World models, whose tokens are long.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api_handles.h"
#include "engine/format/utf8_stream.h"
#include "model_file_writer.h"

namespace aft::testing {
namespace {

using nlohmann::json;

const std::string kFffd = "\xEF\xBF\xBD";

// 1 "a", 2 e4 b8 (the first two bytes of U+4E2D), 3 ad (its last), 4 ff, 5 a long token, 6 f0 9f.
json world_tokenizer() {
  return {{"type", "world"},
          {"vocab", {nullptr, "61", "e4b8", "ad", "ff", std::string(200, '6') + "21", "f09f"}}};
}

ModelHandle model_with(TempFile& file, const json& tokenizer, int64_t vocab_size) {
  json config = tiny_config("simple");
  config["vocab_size"] = vocab_size;
  write_model_file(file.path(), config, tokenizer, random_tensors(config, 4));
  return load_model(file.path());
}

class Detokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = model_with(file_, world_tokenizer(), 7);
    ASSERT_TRUE(model_);
    ASSERT_EQ(aft_detokenizer_create(model_.get(), &d_), AFT_OK) << aft_last_error();
  }
  void TearDown() override { aft_detokenizer_free(d_); }
  std::string push(int32_t token) {
    char text[512];
    size_t n = 99;
    EXPECT_EQ(aft_detokenizer_push(d_, token, text, sizeof text, &n), AFT_OK) << aft_last_error();
    return std::string(text, n);
  }
  std::string flush() {
    char text[8];
    size_t n = 99;
    EXPECT_EQ(aft_detokenizer_flush(d_, text, sizeof text, &n), AFT_OK) << aft_last_error();
    return std::string(text, n);
  }
  TempFile file_;
  ModelHandle model_;
  aft_detokenizer* d_ = nullptr;
};

TEST_F(Detokenizer, HoldsACharacterUntilItCompletes) {
  EXPECT_EQ(push(1), "a");
  EXPECT_EQ(push(2), "");  // e4 b8: two thirds of a character
  EXPECT_EQ(push(3), "\xe4\xb8\xad");
  EXPECT_EQ(push(0), "");  // the end of text has no bytes
  EXPECT_EQ(flush(), "");
}

TEST_F(Detokenizer, IllFormedBytesBecomeReplacementCharacters) {
  EXPECT_EQ(push(4), kFffd);        // ff never starts a character
  EXPECT_EQ(push(2), "");           // e4 b8 ...
  EXPECT_EQ(push(1), kFffd + "a");  // ... cut short by "a": one U+FFFD for e4 b8
  EXPECT_EQ(push(3), kFffd);        // a lone continuation byte
  EXPECT_EQ(push(6), "");           // f0 9f ...
  EXPECT_EQ(flush(), kFffd);        // ... never finished
  EXPECT_EQ(push(2), "");           // flush started afresh
  EXPECT_EQ(push(3), "\xe4\xb8\xad");
}

TEST_F(Detokenizer, TooSmallABufferConsumesNothing) {
  EXPECT_EQ(push(2), "");
  char small[4];
  size_t n = 0;
  EXPECT_EQ(aft_detokenizer_push(d_, 5, small, sizeof small, &n), AFT_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, kFffd.size() + 101);
  EXPECT_EQ(push(3), "\xe4\xb8\xad");  // the refused token was not taken
  EXPECT_EQ(aft_detokenizer_push(d_, 7, small, sizeof small, &n), AFT_ERR_OUT_OF_RANGE);
  EXPECT_EQ(aft_detokenizer_push(d_, -1, small, sizeof small, &n), AFT_ERR_OUT_OF_RANGE);
  EXPECT_EQ(push(1), "a");
}

TEST_F(Detokenizer, NullArgumentsAreRejected) {
  aft_detokenizer* d = nullptr;
  EXPECT_EQ(aft_detokenizer_create(nullptr, &d), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(d, nullptr);
  EXPECT_EQ(aft_detokenizer_create(model_.get(), nullptr), AFT_ERR_INVALID_ARGUMENT);
  size_t n = 0;
  char text[8];
  EXPECT_EQ(aft_detokenizer_push(nullptr, 1, text, sizeof text, &n), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(aft_last_error()).find("detokenizer is NULL"), std::string::npos);
  EXPECT_EQ(aft_detokenizer_push(d_, 1, text, sizeof text, nullptr), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(aft_detokenizer_push(d_, 1, nullptr, 8, &n), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(aft_detokenizer_flush(nullptr, text, sizeof text, &n), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(aft_detokenizer_flush(d_, text, sizeof text, nullptr), AFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(aft_detokenizer_push(d_, 0, nullptr, 0, &n), AFT_OK);  // nothing to write
  aft_detokenizer_free(nullptr);
}

TEST_F(Detokenizer, LongTokensThroughTokenToText) {
  aft_model_info info{};
  ASSERT_EQ(aft_model_get_info(model_.get(), &info), AFT_OK);
  EXPECT_STREQ(info.tokenizer, "world");
  char piece[8];
  size_t n = 0;
  EXPECT_EQ(aft_token_to_text(model_.get(), 5, piece, sizeof piece, &n), AFT_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, 101u);
  std::vector<char> big(n);
  ASSERT_EQ(aft_token_to_text(model_.get(), 5, big.data(), big.size(), &n), AFT_OK);
  EXPECT_EQ(std::string(big.data(), n), std::string(100, 'f') + "!");
  EXPECT_EQ(aft_token_to_text(model_.get(), 0, nullptr, 0, &n), AFT_OK);
  EXPECT_EQ(n, 0u);
  int32_t tokens[4];
  const std::string text = "a\xe4\xb8\xad\xff";
  ASSERT_EQ(aft_tokenize(model_.get(), text.data(), text.size(), tokens, 4, &n), AFT_OK);
  EXPECT_EQ(std::vector<int32_t>(tokens, tokens + n), (std::vector<int32_t>{1, 2, 3, 4}));
}

TEST(DetokenizerBpe, AModelWithABpeTokenizer) {
  json vocab = json::array();
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    if (!printable) continue;
    std::string c;
    if (b < 128)
      c.push_back(static_cast<char>(b));
    else {
      c.push_back(static_cast<char>(0xC0 | b >> 6));
      c.push_back(static_cast<char>(0x80 | (b & 0x3F)));
    }
    vocab.push_back(c);
  }
  // Only the printable bytes: the others (space among them) have no token.
  vocab.push_back("ab");
  const json tokenizer = {{"type", "bpe"},
                          {"normalizer", "nfc"},
                          {"pre_tokenizer", "gpt2"},
                          {"vocab", vocab},
                          {"merges", json::array({json::array({"a", "b"})})}};
  TempFile file;
  const ModelHandle model = model_with(file, tokenizer, static_cast<int64_t>(vocab.size()));
  ASSERT_TRUE(model);
  aft_model_info info{};
  ASSERT_EQ(aft_model_get_info(model.get(), &info), AFT_OK);
  EXPECT_STREQ(info.tokenizer, "bpe");
  int32_t tokens[4];
  size_t n = 0;
  ASSERT_EQ(aft_tokenize(model.get(), "ab!", 3, tokens, 4, &n), AFT_OK) << aft_last_error();
  EXPECT_EQ(std::vector<int32_t>(tokens, tokens + n),
            (std::vector<int32_t>{static_cast<int32_t>(vocab.size()) - 1, 0}));
  EXPECT_EQ(aft_tokenize(model.get(), "a b", 3, tokens, 4, &n), AFT_ERR_TOKENIZE);
  EXPECT_NE(std::string(aft_last_error()).find("byte 0x20 has no token"), std::string::npos)
      << aft_last_error();
}

TEST(Utf8Stream, EveryWayOfCuttingAText) {
  // Any split of valid UTF-8 into pieces gives the text back exactly.
  const std::string text = "a\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80z";
  for (std::size_t cut1 = 0; cut1 <= text.size(); ++cut1) {
    for (std::size_t cut2 = cut1; cut2 <= text.size(); ++cut2) {
      aft::Utf8Stream s;
      std::string out = s.push(text.substr(0, cut1));
      out += s.push(text.substr(cut1, cut2 - cut1));
      out += s.push(text.substr(cut2));
      out += s.flush();
      EXPECT_EQ(out, text) << cut1 << " " << cut2;
    }
  }
  // Surrogates and overlong forms are ill-formed at once, not held.
  aft::Utf8Stream s;
  EXPECT_EQ(s.push("\xed\xa0"), kFffd + kFffd);
  EXPECT_EQ(s.push("\xe0\x80"), kFffd + kFffd);
  EXPECT_EQ(s.push("\xf4\x90"), kFffd + kFffd);
  EXPECT_EQ(s.pending(), 0u);
}

}  // namespace
}  // namespace aft::testing
