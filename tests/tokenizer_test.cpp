// Byte and character tokenizers: round trips, strict UTF-8, and the errors for bad vocabularies
// and text the vocabulary cannot represent.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/format/error.h"
#include "engine/format/tokenizer.h"

namespace {

using nlohmann::json;

const char* const kWhere = "model.aft";

aft::Tokenizer char_tokenizer(const std::vector<std::string>& vocab) {
  return aft::Tokenizer::from_json(json{{"type", "char"}, {"vocab", vocab}}, kWhere);
}

std::string decode(const aft::Tokenizer& tok, const std::vector<int32_t>& tokens) {
  std::string text;
  for (const int32_t t : tokens) text += tok.piece(t);
  return text;
}

// The call must throw aft::Error with `status` and a message containing every word given.
template <typename F>
void expect_error(F&& call, aft_status status, const std::vector<std::string>& words) {
  try {
    call();
    ADD_FAILURE() << "no error";
  } catch (const aft::Error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    const std::string message = e.what();
    for (const std::string& w : words) {
      EXPECT_NE(message.find(w), std::string::npos) << message << "\nlacks: " << w;
    }
  }
}

void expect_bad_vocab(const json& description, const std::vector<std::string>& words) {
  std::vector<std::string> all = {std::string(kWhere) + ": tokenizer"};
  all.insert(all.end(), words.begin(), words.end());
  expect_error([&] { aft::Tokenizer::from_json(description, kWhere); }, AFT_ERR_FORMAT, all);
}

TEST(ByteTokenizer, RoundTripsAnyBytes) {
  const aft::Tokenizer tok = aft::Tokenizer::from_json(json{{"type", "byte"}}, kWhere);
  ASSERT_EQ(tok.vocab_size(), 256u);
  std::string text = "h\xc3\xa9llo \xff\xfe";
  text.push_back('\0');
  const std::vector<int32_t> tokens = tok.encode(text);
  EXPECT_EQ(tokens, (std::vector<int32_t>{'h', 0xc3, 0xa9, 'l', 'l', 'o', ' ', 0xff, 0xfe, 0}));
  EXPECT_EQ(decode(tok, tokens), text);
  for (int32_t i = 0; i < 256; ++i) EXPECT_EQ(tok.piece(i), std::string(1, static_cast<char>(i)));
  EXPECT_TRUE(tok.encode("").empty());
}

TEST(ByteTokenizer, PieceOutOfRange) {
  const aft::Tokenizer tok = aft::Tokenizer::from_json(json{{"type", "byte"}}, kWhere);
  expect_error([&] { tok.piece(256); }, AFT_ERR_OUT_OF_RANGE,
               {"token 256 is outside the vocabulary (size 256)"});
  expect_error([&] { tok.piece(-1); }, AFT_ERR_OUT_OF_RANGE, {"token -1"});
}

TEST(CharTokenizer, EncodesAndDecodesMultiByteUtf8) {
  // 1-, 2-, 3- and 4-byte characters.
  const aft::Tokenizer tok =
      char_tokenizer({"\n", " ", "a", "b", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"});
  ASSERT_EQ(tok.vocab_size(), 7u);
  const std::string text = "ab \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\na";
  const std::vector<int32_t> tokens = tok.encode(text);
  EXPECT_EQ(tokens, (std::vector<int32_t>{2, 3, 1, 4, 5, 6, 0, 2}));
  EXPECT_EQ(decode(tok, tokens), text);
  EXPECT_EQ(tok.piece(5), "\xe2\x82\xac");
  EXPECT_TRUE(tok.encode("").empty());
  expect_error([&] { tok.piece(7); }, AFT_ERR_OUT_OF_RANGE,
               {"token 7 is outside the vocabulary (size 7)"});
}

TEST(CharTokenizer, CharacterOutsideVocabulary) {
  const aft::Tokenizer tok = char_tokenizer({"a", "b", " "});
  expect_error([&] { tok.encode("ab x"); }, AFT_ERR_TOKENIZE,
               {"character 'x' (U+0078) at byte 3 is not in the model's vocabulary"});
  expect_error([&] { tok.encode("a\xc3\xa4"); }, AFT_ERR_TOKENIZE,
               {"character '\xc3\xa4' (U+00E4) at byte 1 is not in the model's vocabulary"});
  expect_error([&] { tok.encode("ab\xf0\x9f\x98\x80"); }, AFT_ERR_TOKENIZE,
               {"'\xf0\x9f\x98\x80' (U+1F600) at byte 2"});
  // Characters that do not print are named by code point only.
  expect_error([&] { tok.encode("a\tb"); }, AFT_ERR_TOKENIZE,
               {"character U+0009 at byte 1 is not in the model's vocabulary"});
  expect_error([&] { tok.encode("a\xe2\x80\x8b"); }, AFT_ERR_TOKENIZE,
               {"character U+200B at byte 1"});
}

TEST(CharTokenizer, InvalidUtf8Text) {
  const aft::Tokenizer tok = char_tokenizer({"a", "b"});
  struct Case {
    std::string text;
    std::string words;
  };
  const Case cases[] = {
      {"a\xff", "byte 0xff at byte 1"},
      {"ab\x80", "byte 0x80 at byte 2"},            // lone continuation byte
      {"a\xc0\xaf", "byte 0xc0 at byte 1"},         // overlong '/'
      {"\xe0\x80\xaf", "byte 0xe0 at byte 0"},      // overlong, 3 bytes
      {"\xf0\x80\x80\xaf", "byte 0xf0 at byte 0"},  // overlong, 4 bytes
      {"ab\xed\xa0\x80", "byte 0xed at byte 2"},    // surrogate U+D800
      {"\xf4\x90\x80\x80", "byte 0xf4 at byte 0"},  // U+110000
      {"a\xe2\x82", "byte 0xe2 at byte 1"},         // truncated sequence
      {"a\xc3"
       "a",
       "byte 0xc3 at byte 1"},  // continuation missing
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.words);
    expect_error([&] { tok.encode(c.text); }, AFT_ERR_TOKENIZE, {"not valid UTF-8", c.words});
  }
}

TEST(CharTokenizer, AcceptsTheExtremesOfUtf8) {
  const aft::Tokenizer tok = char_tokenizer({std::string(1, '\0'), "\x7f", "\xc2\x80",
                                             "\xed\x9f\xbf", "\xee\x80\x80", "\xf4\x8f\xbf\xbf"});
  EXPECT_EQ(tok.encode(std::string("\xf4\x8f\xbf\xbf\xee\x80\x80\xed\x9f\xbf\xc2\x80\x7f\0", 14)),
            (std::vector<int32_t>{5, 4, 3, 2, 1, 0}));
}

TEST(TokenizerFromJson, DuplicateVocabEntry) {
  expect_bad_vocab(json{{"type", "char"}, {"vocab", {"a", "b", "c", "b"}}},
                   {".vocab[3]: duplicate of tokenizer.vocab[1] ('b' (U+0062))"});
}

TEST(TokenizerFromJson, EntryNotOneCodePoint) {
  for (const std::string entry : {"ab", "", "e\xcc\x81", "\xff", "\xc0\xaf", "\xed\xa0\x80"}) {
    SCOPED_TRACE(entry);
    expect_bad_vocab(json{{"type", "char"}, {"vocab", {"x", "y", entry}}},
                     {".vocab[2]: expected exactly one Unicode character"});
  }
  expect_bad_vocab(json{{"type", "char"}, {"vocab", {"x", "ab"}}}, {"found string \"ab\""});
}

TEST(TokenizerFromJson, MalformedDescriptions) {
  expect_bad_vocab(json::array(), {": expected an object, found an array"});
  expect_bad_vocab(json{{"vocab", {"a"}}}, {": missing key \"type\""});
  expect_bad_vocab(json{{"type", "wordpiece"}},
                   {".type: expected \"byte\", \"char\", \"bpe\" or \"world\", found string "
                    "\"wordpiece\""});
  expect_bad_vocab(json{{"type", 1}}, {".type: expected \"byte\", \"char\", \"bpe\" or \"world\", "
                                       "found 1"});
  expect_bad_vocab(json{{"type", "char"}}, {"missing key \"vocab\""});
  expect_bad_vocab(json{{"type", "char"}, {"vocab", "abc"}},
                   {".vocab: expected an array of strings, found string \"abc\""});
  expect_bad_vocab(json{{"type", "char"}, {"vocab", json::array()}}, {".vocab: is empty"});
  expect_bad_vocab(json{{"type", "char"}, {"vocab", {"a", 5}}},
                   {".vocab[1]: expected a string, found 5"});
}

TEST(TokenizerFromJson, UnknownKeysAreIgnored) {
  const aft::Tokenizer tok = aft::Tokenizer::from_json(
      json{{"type", "char"}, {"vocab", {"a"}}, {"normalizer", "nfc"}}, kWhere);
  EXPECT_EQ(tok.vocab_size(), 1u);
}

}  // namespace

namespace {

// The token that ends a text: none unless named, any id of the vocabulary, a World model's 0.
TEST(TokenizerEndOfText, NamedOrImplied) {
  EXPECT_EQ(aft::Tokenizer::from_json(json{{"type", "byte"}}, kWhere).end_of_text(), std::nullopt);
  EXPECT_EQ(
      aft::Tokenizer::from_json(json{{"type", "byte"}, {"end_of_text", 3}}, kWhere).end_of_text(),
      3);
  EXPECT_EQ(aft::Tokenizer::from_json(
                json{{"type", "char"}, {"vocab", {"a", "b", "c"}}, {"end_of_text", 2}}, kWhere)
                .end_of_text(),
            2);
  const json world = {{"type", "world"}, {"vocab", {nullptr, "61"}}};
  EXPECT_EQ(aft::Tokenizer::from_json(world, kWhere).end_of_text(), 0);
  json stated = world;
  stated["end_of_text"] = 0;
  EXPECT_EQ(aft::Tokenizer::from_json(stated, kWhere).end_of_text(), 0);
}

TEST(TokenizerEndOfText, OutsideTheVocabularyIsRefused) {
  const json abc = {{"type", "char"}, {"vocab", {"a", "b", "c"}}};
  for (const json& bad : {json(3), json(-1), json("0"), json(1.5), json(nullptr), json(true)}) {
    json description = abc;
    description["end_of_text"] = bad;
    expect_bad_vocab(description, {".end_of_text: expected a token id in [0, 3), found "});
  }
  json byte = {{"type", "byte"}, {"end_of_text", 256}};
  expect_bad_vocab(byte, {".end_of_text: expected a token id in [0, 256), found 256"});
  json world = {{"type", "world"}, {"vocab", {nullptr, "61"}}, {"end_of_text", 1}};
  expect_bad_vocab(world, {".end_of_text: expected 0 (a World vocabulary's end of text is token "
                           "0), found 1"});
}

}  // namespace
