#include "tools/server/json_grammar.h"

#include "engine/format/utf8.h"

#include <cctype>
#include <cstring>
#include <limits>

namespace aft::server {

namespace {

bool is_digit(unsigned char byte) { return byte >= '0' && byte <= '9'; }

}  // namespace

bool JsonGrammar::push(const std::string& text) {
  for (char c : text) {
    if (!push(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

bool JsonGrammar::push(unsigned char byte) {
  switch (mode_) {
    case Mode::kStart:
      if (whitespace(byte)) return true;
      return byte == '{' && open('{');
    case Mode::kValue:
      return whitespace(byte) || begin_value(byte);
    case Mode::kValueOrEnd:
      if (whitespace(byte)) return true;
      return byte == ']' ? close('[') : begin_value(byte);
    case Mode::kKeyOrEnd:
      if (whitespace(byte)) return true;
      if (byte == '}') return close('{');
      [[fallthrough]];
    case Mode::kKey:
      if (whitespace(byte)) return true;
      if (byte != '"') return false;
      mode_ = Mode::kString;
      key_ = true;
      return true;
    case Mode::kColon:
      if (whitespace(byte)) return true;
      if (byte != ':') return false;
      mode_ = Mode::kValue;
      whitespace_ = 0;
      return true;
    case Mode::kAfterValue:
      if (whitespace(byte)) return true;
      if (byte == ',') {
        mode_ = open_.back() == '{' ? Mode::kKey : Mode::kValue;
        whitespace_ = 0;
        return true;
      }
      return (byte == '}' || byte == ']') && close(byte == '}' ? '{' : '[');
    case Mode::kString:
    case Mode::kEscape:
    case Mode::kHexDigits:
    case Mode::kUtf8:
      return string_byte(byte);
    case Mode::kNumber:
      return number_byte(byte);
    case Mode::kLiteral:
      if (byte != static_cast<unsigned char>(*literal_)) return false;
      if (*++literal_ == '\0') value_done();
      return true;
    case Mode::kDone:
      return false;
  }
  return false;
}

// Whitespace between tokens, up to kMaxWhitespace in a row.
bool JsonGrammar::whitespace(unsigned char byte) {
  if (byte != ' ' && byte != '\n' && byte != '\t' && byte != '\r') return false;
  return ++whitespace_ <= kMaxWhitespace;
}

bool JsonGrammar::begin_value(unsigned char byte) {
  whitespace_ = 0;
  switch (byte) {
    case '{':
    case '[':
      return open(static_cast<char>(byte));
    case '"':
      mode_ = Mode::kString;
      key_ = false;
      return true;
    case 't':
    case 'f':
    case 'n':
      literal_ = byte == 't' ? "rue" : byte == 'f' ? "alse" : "ull";
      mode_ = Mode::kLiteral;
      return true;
    case '-':
      number_ = NumberPart::kMinus;
      break;
    default:
      if (!is_digit(byte)) return false;
      number_ = byte == '0' ? NumberPart::kZero : NumberPart::kInt;
  }
  mode_ = Mode::kNumber;
  digits_ = 1;  // the first digit (or the sign)
  return true;
}

bool JsonGrammar::open(char container) {
  if (open_.size() >= kMaxDepth) return false;
  open_ += container;
  mode_ = container == '{' ? Mode::kKeyOrEnd : Mode::kValueOrEnd;
  whitespace_ = 0;
  return true;
}

bool JsonGrammar::close(char container) {
  if (open_.empty() || open_.back() != container) return false;
  open_.pop_back();
  value_done();
  return true;
}

void JsonGrammar::value_done() {
  mode_ = open_.empty() ? Mode::kDone : Mode::kAfterValue;
  whitespace_ = 0;
}

bool JsonGrammar::string_byte(unsigned char byte) {
  switch (mode_) {
    case Mode::kEscape:
      if (byte == 'u') {
        mode_ = Mode::kHexDigits;
        pending_ = 4;
        return true;
      }
      mode_ = Mode::kString;
      return std::strchr("\"\\/bfnrt", byte) != nullptr && byte != '\0';
    case Mode::kHexDigits: {
      if (!std::isxdigit(byte)) return false;
      if (pending_ == 3 && escape_d_ && byte >= '8') return false;  // \ud800 to \udfff
      escape_d_ = pending_ == 4 && (byte == 'd' || byte == 'D');
      if (--pending_ == 0) mode_ = Mode::kString;
      return true;
    }
    case Mode::kUtf8:
      if (byte < next_low_ || byte > next_high_) return false;
      next_low_ = 0x80;
      next_high_ = 0xBF;
      if (--pending_ == 0) mode_ = Mode::kString;
      return true;
    default:
      break;
  }
  // Mode::kString. UTF-8 as Unicode's table 3-7 allows it: no overlong forms, no surrogates,
  // nothing past U+10FFFF.
  if (byte == '"') {
    if (key_) {
      mode_ = Mode::kColon;
      whitespace_ = 0;
    } else {
      value_done();
    }
    return true;
  }
  if (byte == '\\') {
    mode_ = Mode::kEscape;
    return true;
  }
  if (byte < 0x20) return false;  // control characters are escaped
  if (byte < 0x80) return true;
  const Utf8Lead lead = utf8_lead(byte);
  if (lead.length == 0) return false;
  pending_ = static_cast<int>(lead.length) - 1;
  next_low_ = lead.low;
  next_high_ = lead.high;
  mode_ = Mode::kUtf8;
  return true;
}

bool JsonGrammar::number_byte(unsigned char byte) {
  const bool digit = is_digit(byte);
  const bool exponent = byte == 'e' || byte == 'E';
  switch (number_) {
    case NumberPart::kMinus:
      if (!digit) return false;
      number_ = byte == '0' ? NumberPart::kZero : NumberPart::kInt;
      return true;
    case NumberPart::kZero:
    case NumberPart::kInt:
      if (digit && number_ == NumberPart::kInt) return ++digits_ <= kMaxIntegerDigits;
      if (byte == '.') {
        number_ = NumberPart::kDot;
        return true;
      }
      if (exponent) {
        number_ = NumberPart::kE;
        return true;
      }
      break;  // the number has ended
    case NumberPart::kDot:
      if (!digit) return false;
      number_ = NumberPart::kFrac;
      return true;
    case NumberPart::kFrac:
      if (digit) return true;
      if (exponent) {
        number_ = NumberPart::kE;
        return true;
      }
      break;
    case NumberPart::kE:
      if (byte == '+' || byte == '-') {
        number_ = NumberPart::kExpSign;
        return true;
      }
      [[fallthrough]];
    case NumberPart::kExpSign:
      if (!digit) return false;
      number_ = NumberPart::kExp;
      digits_ = 1;
      return true;
    case NumberPart::kExp:
      if (digit) return ++digits_ <= kMaxExponentDigits;
      break;
  }
  // A byte that ends a complete number belongs to what follows it.
  value_done();
  return push(byte);
}

size_t mask_refused_tokens(const JsonGrammar& grammar, const cli::Vocabulary& vocabulary,
                           float* logits) {
  size_t allowed = 0;
  for (int32_t token = 0; token < vocabulary.size(); ++token) {
    const std::string& text = vocabulary.text(token);
    JsonGrammar trial = grammar;
    if (!text.empty() && trial.push(text)) {
      ++allowed;
    } else {
      logits[token] = -std::numeric_limits<float>::infinity();
    }
  }
  return allowed;
}

}  // namespace aft::server
