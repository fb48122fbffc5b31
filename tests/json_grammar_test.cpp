// aft-server's JSON grammar (response_format json_object): what it accepts is what a strict JSON
// parser (nlohmann's) reads as one object, checked on cases and on random walks through it.
#include "tools/server/json_grammar.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace aft::testing {
namespace {

using server::JsonGrammar;

// Whether text is accepted whole, and the object has closed at its last byte (not before).
bool accepted_whole(const std::string& text) {
  JsonGrammar grammar;
  for (size_t i = 0; i < text.size(); ++i) {
    if (grammar.complete() || !grammar.push(static_cast<unsigned char>(text[i]))) return false;
  }
  return grammar.complete();
}

bool accepted_as_prefix(const std::string& text) { return JsonGrammar().push(text); }

TEST(JsonGrammar, AcceptsObjects) {
  const std::vector<std::string> objects = {
      "{}",
      " \n{ } ",  // the trailing space is refused: nothing follows the object
      R"({"a":1})",
      R"({"a": [1, -2.5e+3, 0, 0.25, 1E9, -0, true, false, null, {}, [], [[]]]})",
      R"({"long": [12345678901234567890, -12345678901234567890.5e-99, 9E99]})",
      R"({"key": "text with \"quotes\", \\ \/ \b\f\n\r\t and \u00e9 \u20AC \uD7FF \uE000"})",
      "{\"raw\": \"\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xED\x9F\xBF \xF4\x8F\xBF\xBF\"}",
      "{\n  \"nested\": {\n    \"list\": [\n      1,\n      2\n    ]\n  }\n}",
  };
  for (std::string text : objects) {
    if (text == " \n{ } ") {
      EXPECT_FALSE(accepted_whole(text));
      text.pop_back();
    }
    EXPECT_TRUE(accepted_whole(text)) << text;
    const nlohmann::json parsed = nlohmann::json::parse(text, nullptr, false);
    EXPECT_TRUE(parsed.is_object()) << text;
  }
}

TEST(JsonGrammar, RefusesWhatIsNotOneObject) {
  const std::vector<std::string> refused = {
      "[]",                            // the top level is an object
      "\"a\"",                         //
      "{\"a\"}",                       // a key without a value
      "{\"a\":01}",                    // a leading zero
      "{\"a\":1,}",                    // a trailing comma
      "{,}",                           //
      "{\"a\":-}",                     // a sign alone
      "{\"a\":1.}",                    // a dot without digits
      "{\"a\":.5}",                    //
      "{\"a\":1e}",                    //
      "{\"a\":+1}",                    //
      "{\"a\":tru}",                   //
      "{\"a\":True}",                  //
      "{'a':1}",                       // single quotes
      "{a:1}",                         // a bare key
      "{\"a\":1]",                     // the wrong bracket
      "{\"a\":[1}",                    //
      "{\"a\":\"\x01\"}",              // a raw control character
      "{\"a\":\"\\q\"}",               // an unknown escape
      "{\"a\":\"\\u12G4\"}",           // not hex
      "{\"a\":\"\\ud800\"}",           // a surrogate escape
      "{\"a\":\"\\uDFFF\"}",           //
      "{\"a\":\"\xC0\x80\"}",          // an overlong form
      "{\"a\":\"\xE0\x80\x80\"}",      //
      "{\"a\":\"\xED\xA0\x80\"}",      // a surrogate in UTF-8
      "{\"a\":\"\xF4\x90\x80\x80\"}",  // past U+10FFFF
      "{\"a\":\"\x80\"}",              // a continuation byte alone
      "{\"a\":\"\xC3\"}",              // a character cut short
      "{}{}",                          // something after the object
  };
  for (const std::string& text : refused) {
    EXPECT_FALSE(accepted_whole(text)) << text;
    const nlohmann::json parsed = nlohmann::json::parse(text, nullptr, false);
    EXPECT_TRUE(parsed.is_discarded() || !parsed.is_object()) << "the case is an object: " << text;
  }
  // JSON, but past the bounds that keep a number a finite double.
  EXPECT_FALSE(accepted_whole("{\"a\":123456789012345678901}"));
  EXPECT_FALSE(accepted_whole("{\"a\":-123456789012345678901}"));
  EXPECT_FALSE(accepted_whole("{\"a\":1e100}"));
}

TEST(JsonGrammar, BoundsWhitespaceAndDepth) {
  const std::string run(JsonGrammar::kMaxWhitespace, '\n');
  EXPECT_TRUE(accepted_as_prefix("{" + run + "\"a\"" + run + ":" + run + "1" + run + "}"));
  EXPECT_FALSE(accepted_as_prefix("{" + run + " "));
  EXPECT_FALSE(accepted_as_prefix(run + " {"));
  std::string deep = "{\"a\":";
  for (size_t i = 1; i < JsonGrammar::kMaxDepth; ++i) deep += "[";
  EXPECT_TRUE(accepted_as_prefix(deep + "1"));
  EXPECT_FALSE(accepted_as_prefix(deep + "["));
  EXPECT_FALSE(accepted_as_prefix(deep + "{"));
}

// Random texts the grammar writes: at each step a byte drawn from those it accepts (as the
// sampler draws among the tokens it leaves). Every text that closes is an object to nlohmann.
TEST(JsonGrammar, EveryTextItWritesIsAnObject) {
  const std::string alphabet =
      "{}[]\":,-+.0123456789eEtrufalsn \n\\/bu\x01\xC3\xA9\xED\xA0\xF0\x9F";
  std::mt19937 random(42);
  int closed = 0;
  for (int walk = 0; walk < 3000; ++walk) {
    JsonGrammar grammar;
    std::string text;
    while (!grammar.complete() && text.size() < 400) {
      std::vector<char> allowed;
      for (char c : alphabet) {
        JsonGrammar trial = grammar;
        if (trial.push(static_cast<unsigned char>(c))) allowed.push_back(c);
      }
      ASSERT_FALSE(allowed.empty()) << "a dead end after: " << text;
      const char c = allowed[random() % allowed.size()];
      ASSERT_TRUE(grammar.push(static_cast<unsigned char>(c)));
      text += c;
    }
    if (!grammar.complete()) continue;
    ++closed;
    const nlohmann::json parsed = nlohmann::json::parse(text, nullptr, false);
    ASSERT_TRUE(parsed.is_object()) << text;
  }
  EXPECT_GE(closed, 100);
}

}  // namespace
}  // namespace aft::testing
