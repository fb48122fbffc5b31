#include "utf8_stream.h"

#include <cstdint>

#include "utf8.h"

namespace aft {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// At text[pos], where decode_utf8 found no character: how many bytes are a valid start of one
// (the maximal subpart, at least 1), and whether the text ends inside it (it may still complete).
struct Prefix {
  std::size_t length;
  bool at_end;
};

Prefix valid_prefix(std::string_view text, std::size_t pos) {
  const Utf8Lead lead = utf8_lead(static_cast<uint8_t>(text[pos]));
  const std::size_t need = lead.length;
  if (need == 0) return {1, false};
  std::size_t length = 1;
  while (length < need && pos + length < text.size()) {
    const auto b = static_cast<uint8_t>(text[pos + length]);
    if (b < (length == 1 ? lead.low : 0x80) || b > (length == 1 ? lead.high : 0xBF)) {
      return {length, false};
    }
    ++length;
  }
  return {length, pos + length == text.size()};
}

}  // namespace

std::string Utf8Stream::push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  std::size_t pos = 0;
  while (pos < pending_.size()) {
    const DecodedChar c = decode_utf8(pending_, pos);
    if (c.length > 0) {
      out.append(pending_, pos, c.length);
      pos += c.length;
      continue;
    }
    const Prefix p = valid_prefix(pending_, pos);
    if (p.at_end) break;  // may complete with the next piece
    out.append(kReplacement);
    pos += p.length;
  }
  pending_.erase(0, pos);
  return out;
}

std::string Utf8Stream::flush() {
  std::string out = pending_.empty() ? "" : std::string(kReplacement);
  pending_.clear();
  return out;
}

}  // namespace aft
