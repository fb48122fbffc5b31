// Strict UTF-8 decoding (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace aft {

// What a character's first byte asks of the bytes after it (Unicode's table 3-7): the character's
// length, and the range of its second byte, narrowed where the whole range would allow an overlong
// form, a surrogate or a code point above U+10FFFF (the later bytes are 0x80-0xBF).
struct Utf8Lead {
  std::size_t length;  // 2 to 4; 0 if the byte begins no character of more than one byte
  uint8_t low, high;
};

constexpr Utf8Lead utf8_lead(uint8_t b0) {
  if (b0 >= 0xC2 && b0 <= 0xDF) return {2, 0x80, 0xBF};
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    return {3, static_cast<uint8_t>(b0 == 0xE0 ? 0xA0 : 0x80),
            static_cast<uint8_t>(b0 == 0xED ? 0x9F : 0xBF)};
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    return {4, static_cast<uint8_t>(b0 == 0xF0 ? 0x90 : 0x80),
            static_cast<uint8_t>(b0 == 0xF4 ? 0x8F : 0xBF)};
  }
  return {0, 0x80, 0xBF};
}

// Decodes the character starting at text[pos]: its code point and its length in bytes, or length 0
// if the bytes there are not a well-formed UTF-8 character.
struct DecodedChar {
  uint32_t code_point;
  std::size_t length;
};

inline DecodedChar decode_utf8(std::string_view text, std::size_t pos) {
  const auto byte = [&](std::size_t i) { return static_cast<uint8_t>(text[pos + i]); };
  const std::size_t avail = text.size() - pos;
  const uint8_t b0 = byte(0);
  if (b0 < 0x80) return {b0, 1};
  const Utf8Lead lead = utf8_lead(b0);
  const std::size_t length = lead.length;
  if (length == 0) return {0, 0};
  uint32_t cp = b0 & (0x7Fu >> length);
  if (avail < length) return {0, 0};
  for (std::size_t i = 1; i < length; ++i) {
    const uint8_t b = byte(i);
    if (b < (i == 1 ? lead.low : 0x80) || b > (i == 1 ? lead.high : 0xBF)) return {0, 0};
    cp = cp << 6 | (b & 0x3Fu);
  }
  return {cp, length};
}

// The offset of the first byte that does not start a well-formed character, or text.size() if
// the text is valid UTF-8.
inline std::size_t invalid_utf8_at(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const DecodedChar c = decode_utf8(text, pos);
    if (c.length == 0) break;
    pos += c.length;
  }
  return pos;
}

// "text is not valid UTF-8: byte 0xff at byte 3 does not start a well-formed character".
inline std::string invalid_utf8_message(std::string_view text, std::size_t pos) {
  static const char digits[] = "0123456789abcdef";
  const auto b = static_cast<uint8_t>(text[pos]);
  return std::string("text is not valid UTF-8: byte 0x") + digits[b >> 4] + digits[b & 15] +
         " at byte " + std::to_string(pos) + " does not start a well-formed character";
}

// Appends the UTF-8 bytes of a code point (a valid one: below 0x110000, not a surrogate).
inline void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | cp >> 6));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | cp >> 12));
    out.push_back(static_cast<char>(0x80 | (cp >> 6 & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | cp >> 18));
    out.push_back(static_cast<char>(0x80 | (cp >> 12 & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp >> 6 & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace aft
