// response_format's JSON output: the completion is one JSON object (RFC 8259), of a schema's
// shape when one is given, written token by token. The grammar reads the text a byte at a time;
// before each token the sampler sees only the tokens whose bytes it accepts, so the text is one
// valid object once it closes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tools/server/json_schema.h"

namespace aft::server {

class JsonGrammar {
 public:
  // Nesting of objects and arrays past which the grammar refuses more. Between two tokens of JSON
  // it takes nothing, one space, or a newline and up to kMaxIndent spaces or tabs: a small model
  // left free repeats newlines until max_tokens.
  static constexpr size_t kMaxDepth = 32;
  static constexpr int kMaxIndent = 20;
  // A number's integer digits and exponent digits: any number written is then a finite double
  // (below 1e120), which strict parsers require.
  static constexpr int kMaxIntegerDigits = 20;
  static constexpr int kMaxExponentDigits = 2;
  // A schema's "integer": digits that a 64-bit integer always holds.
  static constexpr int kMaxIntegerTypeDigits = 18;

  // schema outlives the grammar.
  explicit JsonGrammar(const JsonSchema& schema = *JsonSchema::any_object()) : schema_(&schema) {}

  // Takes one byte; false if the grammar refuses it here, the state then unspecified (bytes are
  // tried on a copy).
  bool push(unsigned char byte);
  // Every byte of text, in order; false at the first refused.
  bool push(const std::string& text);
  // The top-level object has closed: nothing may follow.
  bool complete() const { return mode_ == Mode::kDone; }
  // Inside a string, between characters: how many characters of plain text may come
  // (JsonTokenMask); -1 elsewhere.
  int64_t plain_text_room() const {
    return mode_ == Mode::kString ? max_length_ - characters_ : -1;
  }

 private:
  enum class Mode : uint8_t {
    kStart,         // before the top-level object
    kValue,         // after ':' or an array's ','
    kValueOrEnd,    // after '['
    kKeyOrEnd,      // after '{'
    kKey,           // after an object's ','
    kKeyLiteral,    // inside the key of an object whose schema lists its properties
    kColon,         // after a key
    kAfterValue,    // after a value inside an object or array
    kString,        // inside a string
    kEscape,        // after a string's backslash
    kHexDigits,     // \u's four digits
    kUtf8,          // a character's continuation bytes
    kNumber,        // inside a number
    kLiteral,       // inside true, false or null
    kValueLiteral,  // inside one of an enum's values (or a const)
    kDone,          // the top-level object has closed
  };
  // Where inside a number: after '-', '0', the integer's digits, '.', the fraction's digits, 'e',
  // the exponent's sign, its digits.
  enum class NumberPart : uint8_t { kMinus, kZero, kInt, kDot, kFrac, kE, kExpSign, kExp };

  // An open object or array.
  struct Frame {
    int32_t node;
    char container;    // '{' or '['
    int32_t next = 0;  // objects with listed properties: the first not yet passed; arrays: items
    int32_t value = JsonSchema::kAny;  // the node of the value to come
  };

  const JsonSchema::Node& node_of(const Frame& frame) const { return schema_->node(frame.node); }
  bool whitespace(unsigned char byte);
  bool begin_value(unsigned char byte);
  bool open(int32_t node, char container);
  bool close(char container);
  void value_done();
  bool key_start(bool may_close, unsigned char byte);
  bool may_close_object() const;
  void start_string(bool key, const JsonSchema::Node& node);
  bool string_byte(unsigned char byte);
  bool number_byte(unsigned char byte);
  // Whether an integer that begins as read so far may still end within minimum_ and maximum_.
  bool integer_in_reach(bool whole) const;
  void start_literals(const JsonSchema::Literals& literals);
  // Narrows the literals that agree with the bytes so far to those that go on with byte.
  bool narrow(unsigned char byte);
  bool literal_done() const {  // the bytes so far are one of the literals (the first in range)
    return literals_->texts[static_cast<size_t>(lo_)].size() == static_cast<size_t>(matched_);
  }

  const JsonSchema* schema_;
  Mode mode_ = Mode::kStart;
  std::vector<Frame> open_;  // innermost last
  bool key_ = false;         // the string being read is an object's key
  NumberPart number_ = NumberPart::kMinus;
  bool integer_ = false;  // the number must be an integer: its sign, digits so far and bounds
  bool negative_ = false;
  int64_t magnitude_ = 0;
  int64_t minimum_ = 0, maximum_ = 0;
  const char* literal_ = nullptr;  // the rest of true, false or null to come
  const JsonSchema::Literals* literals_ = nullptr;
  int32_t lo_ = 0, hi_ = 0, matched_ = 0;  // literals_[lo_, hi_) agree with matched_ bytes
  // The string being read: its characters so far, and the schema's bounds (none for a key).
  int64_t characters_ = 0, min_length_ = 0, max_length_ = 0;
  int pending_ = 0;  // hex digits or UTF-8 continuation bytes still to come
  int digits_ = 0;   // of the number's integer part, or of its exponent
  unsigned char next_low_ = 0x80, next_high_ = 0xBF;  // the next UTF-8 continuation byte's range
  // The whitespace since the last token of JSON: 0 none, -1 a space, n > 0 a newline and n - 1
  // bytes of indentation.
  int whitespace_ = 0;
  // \u's first digit was d: the escape would be a UTF-16 surrogate if the second is 8 or more,
  // which is refused (strict parsers reject a lone one; raw UTF-8 writes any character).
  bool escape_d_ = false;
};

// A vocabulary as the grammar tries it. Inside a string most tokens may come: those of plain text
// (whole UTF-8 characters, no quote, backslash or control character) are known to, without a try.
class JsonTokenMask {
 public:
  // texts: every token's bytes (cli::Vocabulary::texts()), which outlive the mask; end_of_text:
  // the model's token that ends a text (-1: none), whatever its bytes, as no JSON goes on past it.
  JsonTokenMask(const std::vector<std::string>& texts, int32_t end_of_text);

  // Sets to -inf the logits of the tokens whose bytes grammar refuses (and of tokens with none,
  // and of the end of text); returns how many tokens are left.
  size_t mask(const JsonGrammar& grammar, float* logits) const;

 private:
  const std::vector<std::string>& texts_;
  int64_t end_of_text_;
  std::vector<int64_t> plain_characters_;  // of a token of plain text; -1: not plain text
};

}  // namespace aft::server
