// response_format {"type": "json_object"}: the completion is one JSON object (RFC 8259), written
// token by token. The grammar reads the text a byte at a time; before each token the sampler sees
// only the tokens whose bytes it accepts, so the text is one valid JSON object once it closes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tools/cli/vocabulary.h"

namespace aft::server {

class JsonGrammar {
 public:
  // Nesting of objects and arrays, and a run of whitespace between tokens, past which the grammar
  // refuses more: a small model left free repeats newlines or brackets until max_tokens.
  static constexpr size_t kMaxDepth = 32;
  static constexpr int kMaxWhitespace = 24;
  // A number's integer digits and exponent digits: any number written is then a finite double
  // (below 1e120), which strict parsers require.
  static constexpr int kMaxIntegerDigits = 20;
  static constexpr int kMaxExponentDigits = 2;

  // Takes one byte; false if the grammar refuses it here, the state then unspecified (bytes are
  // tried on a copy).
  bool push(unsigned char byte);
  // Every byte of text, in order; false at the first refused.
  bool push(const std::string& text);
  // The top-level object has closed: nothing may follow.
  bool complete() const { return mode_ == Mode::kDone; }

 private:
  enum class Mode : uint8_t {
    kStart,       // before the top-level object
    kValue,       // after ':' or an array's ','
    kValueOrEnd,  // after '['
    kKeyOrEnd,    // after '{'
    kKey,         // after an object's ','
    kColon,       // after a key
    kAfterValue,  // after a value inside an object or array
    kString,      // inside a string
    kEscape,      // after a string's backslash
    kHexDigits,   // \u's four digits
    kUtf8,        // a character's continuation bytes
    kNumber,      // inside a number
    kLiteral,     // inside true, false or null
    kDone,        // the top-level object has closed
  };
  // Where inside a number: after '-', '0', the integer's digits, '.', the fraction's digits, 'e',
  // the exponent's sign, its digits.
  enum class NumberPart : uint8_t { kMinus, kZero, kInt, kDot, kFrac, kE, kExpSign, kExp };

  bool whitespace(unsigned char byte);
  bool begin_value(unsigned char byte);
  bool open(char container);  // '{' or '['
  bool close(char container);
  void value_done();
  bool string_byte(unsigned char byte);
  bool number_byte(unsigned char byte);

  Mode mode_ = Mode::kStart;
  std::string open_;  // the open containers, '{' or '[', innermost last
  bool key_ = false;  // the string being read is an object's key
  NumberPart number_ = NumberPart::kMinus;
  const char* literal_ = nullptr;  // the rest of true, false or null to come
  int pending_ = 0;                // hex digits or UTF-8 continuation bytes still to come
  int digits_ = 0;                 // of the number's integer part, or of its exponent
  unsigned char next_low_ = 0x80, next_high_ = 0xBF;  // the next UTF-8 continuation byte's range
  int whitespace_ = 0;                                // the current run
  // \u's first digit was d: the escape would be a UTF-16 surrogate if the second is 8 or more,
  // which is refused (strict parsers reject a lone one; raw UTF-8 writes any character).
  bool escape_d_ = false;
};

// Sets to -inf the logits of the tokens whose bytes grammar refuses (and of tokens with none);
// returns how many tokens are left.
size_t mask_refused_tokens(const JsonGrammar& grammar, const cli::Vocabulary& vocabulary,
                           float* logits);

}  // namespace aft::server
