// aft-server's JSON grammar (response_format json_object): what it accepts is what a strict JSON
// parser (nlohmann's) reads as one object, checked on cases and on random walks through it.
#include "tools/server/json_grammar.h"

#include <gtest/gtest.h>
#include <algorithm>

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
      "\n{ } ",  // the trailing space is refused: nothing follows the object
      R"({"a":1})",
      R"({"a": [1, -2.5e+3, 0, 0.25, 1E9, -0, true, false, null, {}, [], [[]]]})",
      R"({"long": [12345678901234567890, -12345678901234567890.5e-99, 9E99]})",
      R"({"key": "text with \"quotes\", \\ \/ \b\f\n\r\t and \u00e9 \u20AC \uD7FF \uE000"})",
      "{\"raw\": \"\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xED\x9F\xBF \xF4\x8F\xBF\xBF\"}",
      "{\n  \"nested\": {\n    \"list\": [\n      1,\n      2\n    ]\n  }\n}",
  };
  for (std::string text : objects) {
    if (text == "\n{ } ") {
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
  const std::string indent = "\n" + std::string(JsonGrammar::kMaxIndent - 1, ' ') + "\t";
  EXPECT_TRUE(accepted_as_prefix("{" + indent + "\"a\" :" + indent + "1 }"));
  EXPECT_FALSE(accepted_as_prefix("{" + indent + " "));  // deeper than kMaxIndent
  EXPECT_FALSE(accepted_as_prefix("{\n\n"));             // a second newline
  EXPECT_FALSE(accepted_as_prefix("{  "));               // a second space
  EXPECT_FALSE(accepted_as_prefix("{ \n"));              // a newline after a space
  EXPECT_FALSE(accepted_as_prefix("{\t"));               // a tab but as indentation
  EXPECT_FALSE(accepted_as_prefix("{\r\n"));
  std::string deep = "{\"a\":";
  for (size_t i = 1; i < JsonGrammar::kMaxDepth; ++i) deep += "[";
  EXPECT_TRUE(accepted_as_prefix(deep + "1"));
  EXPECT_FALSE(accepted_as_prefix(deep + "["));
  EXPECT_FALSE(accepted_as_prefix(deep + "{"));
}

// Random texts the grammar writes, walks of up to 600 bytes: at each step a byte drawn from those
// of alphabet that it accepts (as the sampler draws among the tokens it leaves). Calls check with
// each text that closes; returns how many did, or -1 at a dead end (no byte accepted).
template <typename Check>
int random_walks(const JsonGrammar& start, const std::string& alphabet, int walks, Check check) {
  std::mt19937 random(42);
  int closed = 0;
  for (int walk = 0; walk < walks; ++walk) {
    JsonGrammar grammar = start;
    std::string text;
    while (!grammar.complete() && text.size() < 600) {
      std::vector<char> allowed;
      for (char c : alphabet) {
        JsonGrammar trial = grammar;
        if (trial.push(static_cast<unsigned char>(c))) allowed.push_back(c);
      }
      if (allowed.empty()) {
        ADD_FAILURE() << "a dead end after: " << text;
        return -1;
      }
      const char c = allowed[random() % allowed.size()];
      if (!grammar.push(static_cast<unsigned char>(c))) return -1;
      text += c;
    }
    if (!grammar.complete()) continue;
    ++closed;
    check(text);
  }
  return closed;
}

// Every text that closes is an object to nlohmann.
TEST(JsonGrammar, EveryTextItWritesIsAnObject) {
  const std::string alphabet =
      "{}[]\":,-+.0123456789eEtrufalsn \n\\/bu\x01\xC3\xA9\xED\xA0\xF0\x9F";
  const int closed = random_walks(JsonGrammar(), alphabet, 3000, [](const std::string& text) {
    EXPECT_TRUE(nlohmann::json::parse(text, nullptr, false).is_object()) << text;
  });
  EXPECT_GE(closed, 100);
}

std::shared_ptr<const server::JsonSchema> compile(const std::string& schema) {
  return server::JsonSchema::compile(nlohmann::ordered_json::parse(schema));
}

bool accepted_whole(const server::JsonSchema& schema, const std::string& text) {
  JsonGrammar grammar(schema);
  for (char c : text) {
    if (grammar.complete() || !grammar.push(static_cast<unsigned char>(c))) return false;
  }
  return grammar.complete();
}

// A verdict: every JSON type, an enum, an array's bound, a string's, an integer's, a $ref and an
// anyOf.
const char kVerdictSchema[] = R"({
  "type": "object",
  "properties": {
    "verdict": {"enum": ["guilty", "not guilty", 12, 1]},
    "count": {"type": "integer", "minimum": -20, "maximum": 300},
    "score": {"type": "number", "description": "ignored"},
    "notes": {"type": "array", "items": {"type": "string", "maxLength": 3}, "minItems": 1,
              "maxItems": 2},
    "judge": {"anyOf": [{"$ref": "#/$defs/person"}, {"type": "null"}]},
    "ok": {"type": ["boolean", "null"]}
  },
  "required": ["verdict", "count", "score", "notes", "judge", "ok"],
  "additionalProperties": false,
  "$defs": {"person": {"type": "object", "properties": {"name": {"type": "string"}},
                       "required": ["name"]}}
})";

TEST(JsonSchema, TheGrammarWritesOnlyTheSchemasShape) {
  const auto schema = compile(kVerdictSchema);
  const std::string good = R"({"verdict": "guilty", "count": -3, "score": 2.5e1, "notes": ["a"], )"
                           R"("judge": {"name": "Ann"}, "ok": true})";
  EXPECT_TRUE(accepted_whole(*schema, good));
  EXPECT_TRUE(accepted_whole(*schema, R"({"verdict":12,"count":0,"score":1,"notes":["a","b"],)"
                                      R"("judge":null,"ok":null})"));
  EXPECT_TRUE(accepted_whole(*schema, R"({"verdict":1,"count":0,"score":1,"notes":["a","b"],)"
                                      R"("judge":null,"ok":null})"));
  const std::vector<std::string> refused = {
      R"({"count": 1)",                         // the order of the properties
      R"({"verdict": "innocent")",              // not in the enum
      R"({"verdict": 123)",                     //
      R"({"verdict": "guilty", "count": 1.5)",  // not an integer
      R"({"verdict": "guilty", "count": 1e3)",  //
      R"({"verdict": "guilty", "count": "1")",  //
      R"({"verdict": "guilty", "count": 301)",  // maximum
      R"({"verdict": "guilty", "count": -21)",  // minimum
      R"({"verdict": "guilty", "count": 1})",   // required ones left
      R"({"verdict": "guilty", "count": 1, "score": 1, "notes": [])",           // minItems
      R"({"verdict": "guilty", "count": 1, "score": 1, "notes": ["a", "b", )",  // maxItems
      R"({"verdict": "guilty", "count": 1, "score": 1, "notes": [1)",
      R"({"verdict": "guilty", "count": 1, "score": 1, "notes": ["abcd)",  // maxLength
      R"({"verdict": "guilty", "count": 1, "score": 1, "notes": ["a"], "judge": "Ann")",
      R"({"verdict": "guilty", "count": 1, "score": 1, "notes": ["a"], "judge": {})",
      R"({"verdict": "guilty", "count": 1, "score": 1, "notes": ["a"], "judge": null, "ok": 1)",
      R"({"verdict": "guilty", "count": 1, "score": 1, "notes": ["a"], "judge": null, "ok": )"
      R"(true, "more")",  // not among the properties
  };
  for (const std::string& text : refused) {
    EXPECT_FALSE(JsonGrammar(*schema).push(text)) << text;
  }
}

TEST(JsonSchema, OptionalPropertiesMayBeLeftOutInOrder) {
  const auto schema = compile(R"({"type": "object", "properties": {
      "a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
      "required": ["b"]})");
  for (const char* text :
       {R"({"b":1})", R"({"a":1,"b":2})", R"({"b":1,"c":2})", R"({"a":1,"b":2,"c":3})"}) {
    EXPECT_TRUE(accepted_whole(*schema, text)) << text;
  }
  for (const char* text : {R"({})", R"({"a":1})", R"({"c":1,"b":1})", R"({"a":1,"c":2})",
                           R"({"b":1,"b":2})", R"({"b":1,"d":2})"}) {
    EXPECT_FALSE(accepted_whole(*schema, text)) << text;
  }
  // A recursive schema, and an object of any keys whose values are typed.
  const auto tree = compile(R"({"type": "object", "properties": {"value": {"type": "integer"},
      "children": {"type": "array", "items": {"$ref": "#"}}}, "required": ["value", "children"]})");
  EXPECT_TRUE(accepted_whole(*tree, R"({"value":1,"children":[{"value":2,"children":[]}]})"));
  EXPECT_FALSE(accepted_whole(*tree, R"({"value":1,"children":[{"value":2}]})"));
  const auto counts = compile(R"({"type": "object", "additionalProperties": {"type": "integer"}})");
  EXPECT_TRUE(accepted_whole(*counts, R"({"x": 1, "y": 2})"));
  EXPECT_FALSE(accepted_whole(*counts, R"({"x": "1"})"));
}

// Lengths count characters: a UTF-8 character of any length and an escape are one each.
TEST(JsonSchema, StringLengthsCountCharacters) {
  const auto schema = compile(R"({"type": "object", "properties": {
      "code": {"type": "string", "minLength": 2, "maxLength": 3}}, "required": ["code"]})");
  for (const char* text : {R"({"code":"ab"})", R"({"code":"abc"})", R"({"code":"\u00e9\n"})",
                           "{\"code\":\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\"}"}) {
    EXPECT_TRUE(accepted_whole(*schema, text)) << text;
  }
  for (const char* text :
       {R"({"code":""})", R"({"code":"a"})", R"({"code":"abcd"})", R"({"code":"\n\t\"\\"})",
        "{\"code\":\"\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\"}"}) {
    EXPECT_FALSE(accepted_whole(*schema, text)) << text;
  }
  // Keys are not bounded by their value's schema.
  const auto values = compile(R"({"type": "object", "additionalProperties": {"type": "string",
      "maxLength": 1}})");
  EXPECT_TRUE(accepted_whole(*values, R"({"a long key":"x"})"));
  EXPECT_FALSE(accepted_whole(*values, R"({"k":"xy"})"));
}

// Integer bounds are kept digit by digit: a number is refused as soon as no ending of it is
// within them, so the grammar never leads into a dead end.
TEST(JsonSchema, IntegerBoundsHoldAtEveryDigit) {
  const auto schema = compile(R"({"type": "object", "properties": {
      "n": {"type": "integer", "minimum": -5, "maximum": 120},
      "m": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10.5},
      "k": {"type": "integer", "minimum": 100, "maximum": 1e30}},
      "required": ["n", "m", "k"]})");
  for (const char* text : {R"({"n":-5,"m":1,"k":100})", R"({"n":0,"m":10,"k":999})",
                           R"({"n":-0,"m":5,"k":123456789012345678})", R"({"n":120,"m":7,"k":100})",
                           R"({"n":12,"m":9,"k":200})"}) {
    EXPECT_TRUE(accepted_whole(*schema, text)) << text;
  }
  for (const char* text :
       {R"({"n":-6)", R"({"n":121)", R"({"n":130)", R"({"n":1200)", R"({"n":-10)",
        R"({"n":0,"m":0)", R"({"n":0,"m":11)", R"({"n":0,"m":-1)", R"({"n":0,"m":1,"k":-)",
        R"({"n":0,"m":1,"k":0)", R"({"n":0,"m":1,"k":99})"}) {
    EXPECT_FALSE(JsonGrammar(*schema).push(text)) << text;
  }
  // 10 is not above 10: the digits stay, but the number may not end there.
  JsonGrammar grammar(*schema);
  EXPECT_TRUE(grammar.push(R"({"n":0,"m":1,"k":10)"));
  EXPECT_FALSE(JsonGrammar(grammar).push("}"));
  EXPECT_TRUE(grammar.push("0}"));
  EXPECT_TRUE(grammar.complete());
}

// oneOf is anyOf (alternatives told apart by their first byte exclude each other); allOf of one
// schema is that schema, as Pydantic writes a described reference.
TEST(JsonSchema, OneOfAndAllOfOfOne) {
  const auto schema = compile(R"({"type": "object", "properties": {
      "a": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
      "b": {"allOf": [{"$ref": "#/$defs/flag"}], "description": "a flag"}},
      "required": ["a", "b"], "$defs": {"flag": {"enum": [true, "yes"]}}})");
  EXPECT_TRUE(accepted_whole(*schema, R"({"a":1,"b":true})"));
  EXPECT_TRUE(accepted_whole(*schema, R"({"a":"x","b":"yes"})"));
  EXPECT_FALSE(accepted_whole(*schema, R"({"a":null,"b":true})"));
  EXPECT_FALSE(accepted_whole(*schema, R"({"a":1,"b":false})"));
}

TEST(JsonSchema, WhatItCannotEnforceIsRefused) {
  std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type": "array"})", "root"},
      {R"({"enum": [{}]})", "root"},
      {R"({"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}})", "pattern"},
      {R"({"type": "object", "properties": {"a": {"type": "number", "minimum": 0}}})", "minimum"},
      {R"({"type": "object", "properties": {"a": {"type": "strin"}}})", "strin"},
      {R"({"type": "object", "properties": {"a": {}}, "required": ["b"]})", "\"b\""},
      {R"({"type": "object", "properties": {"a": {"anyOf": [{"type": "integer"},
           {"type": "number"}]}}})",
       "anyOf"},
      {R"({"type": "object", "properties": {"a": {"$ref": "#/$defs/none"}}})", "#/$defs/none"},
      {R"({"type": "object", "properties": {"a": {"type": "array", "minItems": 3,
           "maxItems": 2}}})",
       "minItems"},
      {R"({"type": "object", "properties": {"a": {"enum": []}}})", "enum"},
      {R"({"type": "object", "properties": {"a": {"type": "string", "minLength": 3,
           "maxLength": 2}}})",
       "minLength"},
      {R"({"type": "object", "properties": {"a": {"type": "string", "maxLength": -1}}})",
       "maxLength"},
      {R"({"type": "object", "properties": {"a": {"type": "number", "maximum": 1}}})",
       "integer\"} only"},
      {R"({"type": "object", "properties": {"a": {"type": "integer", "minimum": 1.5,
           "maximum": 1.9}}})",
       "no integer"},
      {R"({"type": "object", "properties": {"a": {"type": "integer", "minimum": "1"}}})",
       "minimum: expected a number"},
      {R"({"type": "object", "properties": {"a": {"allOf": [{"type": "string"},
           {"maxLength": 2}]}}})",
       "allOf of more than one"},
      {R"({"type": "object", "properties": {"a": {"oneOf": [{"type": "string"},
           {"enum": ["x"]}]}}})",
       "oneOf"},
      {R"({"type": "object", "properties": {"a": {"allOf": [{"type": "string"}],
           "maxLength": 2}}})",
       "beside \"allOf\""},
      {R"({"type": "object", "properties": {"a": false}})", "false"},
  };
  // 1,000 optional properties: their keys would be listed 500,000 times.
  std::string many = R"({"type": "object", "properties": {)";
  for (int i = 0; i < 1000; ++i)
    many += (i ? ", " : "") + std::string("\"p") + std::to_string(i) + "\": {}";
  cases.emplace_back(many + "}}", "optional properties");
  for (const auto& [schema, named] : cases) {
    try {
      compile(schema);
      ADD_FAILURE() << "compiled: " << schema;
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find(named), std::string::npos)
          << error.what() << " does not name " << named;
    }
  }
}

// Whether value is what kVerdictSchema describes (the checks a validator would make of it).
bool is_verdict(const nlohmann::ordered_json& value) {
  std::vector<std::string> keys;
  for (const auto& item : value.items()) keys.push_back(item.key());
  const std::vector<std::string> expected = {"verdict", "count", "score", "notes", "judge", "ok"};
  if (keys != expected) return false;
  const auto& verdict = value["verdict"];
  const bool verdict_ok =
      verdict == "guilty" || verdict == "not guilty" || verdict == 12 || verdict == 1;
  bool notes_ok =
      value["notes"].is_array() && !value["notes"].empty() && value["notes"].size() <= 2;
  for (const auto& note : value["notes"]) {
    notes_ok = notes_ok && note.is_string() &&
               std::count_if(note.get_ref<const std::string&>().begin(),
                             note.get_ref<const std::string&>().end(), [](char c) {
                               return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
                             }) <= 3;
  }
  const auto& judge = value["judge"];
  const bool judge_ok = judge.is_null() || (judge.is_object() && judge.size() == 1 &&
                                            judge.contains("name") && judge["name"].is_string());
  const auto& count = value["count"];
  return verdict_ok && count.is_number_integer() && count >= -20 && count <= 300 &&
         value["score"].is_number() && notes_ok && judge_ok &&
         (value["ok"].is_boolean() || value["ok"].is_null());
}

// Random walks through the schema's grammar: every text that closes is a verdict.
TEST(JsonSchema, EveryTextItWritesHasTheSchemasShape) {
  const auto schema = compile(kVerdictSchema);
  const std::string alphabet = "{}[]\":, \n-.0123456789eEabcdefgijklmnorstuvyANx\\\xC3\xA9";
  const int closed =
      random_walks(JsonGrammar(*schema), alphabet, 2000, [](const std::string& text) {
        const auto parsed = nlohmann::ordered_json::parse(text, nullptr, false);
        EXPECT_TRUE(!parsed.is_discarded() && is_verdict(parsed)) << text;
      });
  EXPECT_GE(closed, 100);
}

// The mask's shortcut inside strings (plain tokens taken without a try) gives the same tokens as
// trying every token, at every point of random texts, over a vocabulary of plain and other tokens;
// the end of text, plain text as it may be, is never taken.
TEST(JsonTokenMask, IsTryingEveryToken) {
  const std::string bytes = "ab \"\\{}[]:,0-.en\n\x01\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
  std::mt19937 random(3);
  std::vector<std::string> texts(3000);
  for (size_t t = 1; t < texts.size(); ++t) {  // token 0 has no bytes
    for (size_t n = 1 + random() % 5; n > 0; --n) texts[t] += bytes[random() % bytes.size()];
  }
  const int32_t end_of_text = 1;
  texts[end_of_text] = "a";
  const server::JsonTokenMask mask(texts, end_of_text);
  const auto schema = compile(kVerdictSchema);
  int checked = 0;
  for (const JsonGrammar& start : {JsonGrammar(), JsonGrammar(*schema)}) {
    random_walks(start, "{}[]\":, -0123456789abcdefgijklmnorstuvyAN\\\xC3\xA9", 15,
                 [&](const std::string& text) {
                   JsonGrammar grammar = start;
                   for (char c : text) {
                     std::vector<float> logits(texts.size(), 0.0f);
                     const size_t allowed = mask.mask(grammar, logits.data());
                     size_t expected = 0;
                     for (size_t t = 0; t < texts.size(); ++t) {
                       JsonGrammar trial = grammar;
                       const bool takes =
                           t != end_of_text && !texts[t].empty() && trial.push(texts[t]);
                       expected += takes;
                       ASSERT_EQ(takes, logits[t] == 0.0f) << "token " << t << " after " << text;
                     }
                     ASSERT_EQ(allowed, expected);
                     grammar.push(static_cast<unsigned char>(c));
                     ++checked;
                   }
                 });
  }
  EXPECT_GE(checked, 300);
}

}  // namespace
}  // namespace aft::testing
