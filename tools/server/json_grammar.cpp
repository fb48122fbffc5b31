#include "tools/server/json_grammar.h"

#include "engine/format/utf8.h"
#include "tools/cli/vocabulary.h"

#include <algorithm>
#include <array>
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
    case Mode::kValue:
      return whitespace(byte) || begin_value(byte);
    case Mode::kValueOrEnd:
      if (whitespace(byte)) return true;
      if (byte == ']') return node_of(open_.back()).min_items == 0 && close('[');
      return node_of(open_.back()).max_items > 0 && begin_value(byte);
    case Mode::kKeyOrEnd:
      return whitespace(byte) || key_start(true, byte);
    case Mode::kKey:
      return whitespace(byte) || key_start(false, byte);
    case Mode::kKeyLiteral: {
      if (byte != '"') return narrow(byte);
      if (!literal_done()) return false;
      Frame& frame = open_.back();
      const int32_t property = literals_->tags[static_cast<size_t>(lo_)];
      frame.value = node_of(frame).properties[static_cast<size_t>(property)].node;
      frame.next = property + 1;
      mode_ = Mode::kColon;
      whitespace_ = 0;
      return true;
    }
    case Mode::kColon:
      if (whitespace(byte)) return true;
      if (byte != ':') return false;
      mode_ = Mode::kValue;
      whitespace_ = 0;
      return true;
    case Mode::kAfterValue: {
      if (whitespace(byte)) return true;
      Frame& frame = open_.back();
      const JsonSchema::Node& node = node_of(frame);
      if (frame.container == '[') {
        if (byte == ']') return frame.next >= node.min_items && close('[');
        if (byte != ',' || frame.next >= node.max_items) return false;
        mode_ = Mode::kValue;
      } else {
        if (byte == '}') return may_close_object() && close('{');
        if (byte != ',') return false;
        if (node.closed && node.keys_from[static_cast<size_t>(frame.next)].texts.empty()) {
          return false;
        }
        mode_ = Mode::kKey;
      }
      whitespace_ = 0;
      return true;
    }
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
    case Mode::kValueLiteral:
      if (narrow(byte)) {
        if (literal_done() && hi_ - lo_ == 1) value_done();
        return true;
      }
      // A byte that ends a complete literal (a number) belongs to what follows it.
      if (!literal_done()) return false;
      value_done();
      return push(byte);
    case Mode::kDone:
      return false;
  }
  return false;
}
bool JsonGrammar::whitespace(unsigned char byte) {
  if (byte == '\n') {
    if (whitespace_ != 0) return false;
    whitespace_ = 1;
    return true;
  }
  if (byte != ' ' && byte != '\t') return false;
  if (whitespace_ == 0 && byte == ' ') {
    whitespace_ = -1;
    return true;
  }
  if (whitespace_ < 1 || whitespace_ > kMaxIndent) return false;
  ++whitespace_;
  return true;
}

bool JsonGrammar::begin_value(unsigned char byte) {
  const int32_t id = schema_->branch(open_.empty() ? schema_->root() : open_.back().value, byte);
  if (id < 0) return false;
  whitespace_ = 0;
  if (!open_.empty() && open_.back().container == '[') ++open_.back().next;
  const JsonSchema::Node& node = schema_->node(id);
  if (!node.literals.texts.empty()) {
    start_literals(node.literals);
    mode_ = Mode::kValueLiteral;
    return push(byte);
  }
  switch (byte) {
    case '{':
    case '[':
      return open(id, static_cast<char>(byte));
    case '"':
      start_string(false, node);
      return true;
    case 't':
    case 'f':
    case 'n':
      literal_ = byte == 't' ? "rue" : byte == 'f' ? "alse" : "ull";
      mode_ = Mode::kLiteral;
      return true;
    default:  // a number: branch() has checked the byte
      number_ = byte == '-'   ? NumberPart::kMinus
                : byte == '0' ? NumberPart::kZero
                              : NumberPart::kInt;
  }
  integer_ = (node.types & JsonSchema::kNumber) == 0;
  mode_ = Mode::kNumber;
  digits_ = 1;  // the first digit (or the sign)
  negative_ = byte == '-';
  magnitude_ = negative_ ? 0 : byte - '0';
  minimum_ = node.minimum;
  maximum_ = node.maximum;
  return !integer_ || integer_in_reach(false);
}

bool JsonGrammar::open(int32_t node, char container) {
  if (open_.size() >= kMaxDepth) return false;
  open_.push_back(
      {node, container, 0, container == '[' ? schema_->node(node).items : JsonSchema::kAny});
  mode_ = container == '{' ? Mode::kKeyOrEnd : Mode::kValueOrEnd;
  whitespace_ = 0;
  return true;
}

bool JsonGrammar::close(char container) {
  if (open_.empty() || open_.back().container != container) return false;
  open_.pop_back();
  value_done();
  return true;
}

void JsonGrammar::value_done() {
  mode_ = open_.empty() ? Mode::kDone : Mode::kAfterValue;
  whitespace_ = 0;
}

// After '{' (may_close) or an object's ',': a key, its quote opening it.
bool JsonGrammar::key_start(bool may_close, unsigned char byte) {
  if (byte == '}') return may_close && may_close_object() && close('{');
  if (byte != '"') return false;
  whitespace_ = 0;
  const Frame& frame = open_.back();
  const JsonSchema::Node& node = node_of(frame);
  if (!node.closed) {
    start_string(true, schema_->node(JsonSchema::kAny));
    return true;
  }
  const JsonSchema::Literals& keys = node.keys_from[static_cast<size_t>(frame.next)];
  if (keys.texts.empty()) return false;
  start_literals(keys);
  mode_ = Mode::kKeyLiteral;
  return true;
}

// Whether the innermost object may close here: no required property is left.
bool JsonGrammar::may_close_object() const {
  const Frame& frame = open_.back();
  const JsonSchema::Node& node = node_of(frame);
  if (!node.closed) return true;
  return std::none_of(node.properties.begin() + frame.next, node.properties.end(),
                      [](const JsonSchema::Property& p) { return p.required; });
}

void JsonGrammar::start_literals(const JsonSchema::Literals& literals) {
  literals_ = &literals;
  lo_ = 0;
  hi_ = static_cast<int32_t>(literals.texts.size());
  matched_ = 0;
}

// The literals are sorted and agree on their first matched_ bytes: the one that ends there comes
// first, then the others by their next byte (std::string compares bytes as unsigned char).
bool JsonGrammar::narrow(unsigned char byte) {
  const std::vector<std::string>& texts = literals_->texts;
  const auto at = static_cast<size_t>(matched_);
  auto next_byte = [&](int32_t i) {
    const std::string& text = texts[static_cast<size_t>(i)];
    return text.size() > at ? static_cast<int>(static_cast<unsigned char>(text[at])) : -1;
  };
  int32_t first = lo_;
  while (first < hi_ && next_byte(first) < byte) ++first;
  int32_t last = first;
  while (last < hi_ && next_byte(last) == byte) ++last;
  if (first == last) return false;
  lo_ = first;
  hi_ = last;
  ++matched_;
  return true;
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
    if (characters_ < min_length_) return false;
    if (key_) {  // an object without listed properties: any key, its value of one schema
      Frame& frame = open_.back();
      frame.value = node_of(frame).values;
      mode_ = Mode::kColon;
      whitespace_ = 0;
    } else {
      value_done();
    }
    return true;
  }
  if (byte < 0x20) return false;  // control characters are escaped
  const Utf8Lead lead = utf8_lead(byte);
  if ((byte >= 0x80 && lead.length == 0) || ++characters_ > max_length_) return false;
  if (byte == '\\') {
    mode_ = Mode::kEscape;
    return true;
  }
  if (byte < 0x80) return true;
  pending_ = static_cast<int>(lead.length) - 1;
  next_low_ = lead.low;
  next_high_ = lead.high;
  mode_ = Mode::kUtf8;
  return true;
}

void JsonGrammar::start_string(bool key, const JsonSchema::Node& node) {
  mode_ = Mode::kString;
  key_ = key;
  characters_ = 0;
  min_length_ = node.min_length;
  max_length_ = node.max_length;
}

bool JsonGrammar::number_byte(unsigned char byte) {
  const bool digit = is_digit(byte);
  const bool exponent = byte == 'e' || byte == 'E';
  switch (number_) {
    case NumberPart::kMinus:
      if (!digit) return false;
      number_ = byte == '0' ? NumberPart::kZero : NumberPart::kInt;
      magnitude_ = byte - '0';
      return !integer_ || integer_in_reach(false);
    case NumberPart::kZero:
    case NumberPart::kInt:
      if (digit && number_ == NumberPart::kInt) {
        if (!integer_) return ++digits_ <= kMaxIntegerDigits;
        if (++digits_ > kMaxIntegerTypeDigits) return false;
        magnitude_ = magnitude_ * 10 + (byte - '0');
        return integer_in_reach(false);
      }
      if (integer_) break;  // '.' or 'e' then follows the integer: refused as what follows
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
  if (integer_ && !integer_in_reach(true)) return false;
  value_done();
  return push(byte);
}

bool JsonGrammar::integer_in_reach(bool ended) const {
  const auto meets = [this](int64_t low, int64_t high) {  // magnitudes in [low, high]
    const int64_t from = negative_ ? -high : low;
    const int64_t to = negative_ ? -low : high;
    return from <= maximum_ && to >= minimum_;
  };
  constexpr int64_t kLargest = 999'999'999'999'999'999;          // kMaxIntegerTypeDigits nines
  if (number_ == NumberPart::kMinus) return meets(0, kLargest);  // "-": any magnitude to come
  if (ended || magnitude_ == 0) return meets(magnitude_, magnitude_);
  // More digits may come: each adds a decimal place to the magnitudes within reach.
  int64_t scale = 1;
  for (int digits = digits_;; ++digits) {  // an integer's digits_ are its magnitude's
    if (meets(magnitude_ * scale, magnitude_ * scale + scale - 1)) return true;
    if (digits == kMaxIntegerTypeDigits) return false;
    scale *= 10;
  }
}

JsonTokenMask::JsonTokenMask(const std::vector<std::string>& texts, int32_t end_of_text)
    : texts_(texts), end_of_text_(end_of_text) {
  plain_characters_.reserve(texts.size());
  for (const std::string& text : texts) {
    const bool printable = std::none_of(text.begin(), text.end(), [](char c) {
      return static_cast<unsigned char>(c) < 0x20 || c == '"' || c == '\\';
    });
    const bool plain = !text.empty() && printable && invalid_utf8_at(text) == text.size();
    plain_characters_.push_back(plain ? cli::code_points_starting(text) : -1);
  }
  if (end_of_text_ >= 0 && static_cast<size_t>(end_of_text_) < plain_characters_.size()) {
    plain_characters_[static_cast<size_t>(end_of_text_)] = -1;
  }
}

size_t JsonTokenMask::mask(const JsonGrammar& grammar, float* logits) const {
  const int64_t room = grammar.plain_text_room();
  // Whether the grammar takes each first byte (0: not tried yet): most tokens are refused there.
  std::array<int8_t, 256> first_byte{};
  size_t allowed = 0;
  JsonGrammar trial = grammar;  // assigned for each token tried: its stack's memory is reused
  for (size_t token = 0; token < texts_.size(); ++token) {
    const std::string& text = texts_[token];
    const int64_t plain = plain_characters_[token];
    bool takes = plain >= 0 && plain <= room;
    if (!takes && !text.empty() && static_cast<int64_t>(token) != end_of_text_) {
      int8_t& first = first_byte[static_cast<unsigned char>(text[0])];
      if (first == 0) {
        trial = grammar;
        first = trial.push(static_cast<unsigned char>(text[0])) ? 1 : -1;
      }
      if (first > 0) {
        trial = grammar;
        takes = trial.push(text);
      }
    }
    if (takes) {
      ++allowed;
    } else {
      logits[token] = -std::numeric_limits<float>::infinity();
    }
  }
  return allowed;
}

}  // namespace aft::server
