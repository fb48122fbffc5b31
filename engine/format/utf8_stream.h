// Bytes arriving in pieces (a token's bytes at a time) out as valid UTF-8 only: a character split
// across pieces is held until its last byte arrives; bytes that cannot form a character become
// U+FFFD, one per maximal ill-formed subpart (the WHATWG and Unicode recommendation), as soon as
// that is certain.
#pragma once

#include <string>
#include <string_view>

namespace aft {

class Utf8Stream {
 public:
  // Takes bytes; returns the text now complete (valid UTF-8, possibly empty).
  std::string push(std::string_view bytes);
  // The held bytes of an unfinished character, as U+FFFD (the stream is then empty).
  std::string flush();
  // Bytes held back (0 to 3).
  std::size_t pending() const { return pending_.size(); }

 private:
  std::string pending_;
};

}  // namespace aft
