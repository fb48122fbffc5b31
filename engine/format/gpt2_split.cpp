#include "gpt2_split.h"

#include "unicode.h"

namespace aft {
namespace {

enum class Class { kLetter, kNumber, kSpace, kOther };

Class class_of(uint32_t cp) {
  if (unicode::is_letter(cp)) return Class::kLetter;
  if (unicode::is_number(cp)) return Class::kNumber;
  if (unicode::is_whitespace(cp)) return Class::kSpace;
  return Class::kOther;
}

// The length of the contraction ('s 't 're 've 'm 'll 'd, case-sensitive) at i, or 0.
std::size_t contraction(const std::vector<uint32_t>& t, std::size_t i) {
  if (t[i] != '\'' || i + 1 >= t.size()) return 0;
  const uint32_t a = t[i + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= t.size()) return 0;
  const uint32_t b = t[i + 2];
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

}  // namespace

std::vector<std::pair<std::size_t, std::size_t>> gpt2_split(const std::vector<uint32_t>& t) {
  std::vector<std::pair<std::size_t, std::size_t>> pieces;
  const std::size_t n = t.size();
  std::vector<Class> cls(n);
  for (std::size_t i = 0; i < n; ++i) cls[i] = class_of(t[i]);
  const auto run_end = [&](std::size_t from, Class c) {
    while (from < n && cls[from] == c) ++from;
    return from;
  };
  for (std::size_t i = 0; i < n;) {
    std::size_t end = i + contraction(t, i);
    if (end == i) {
      // ` ?X+` for the letter, number and other classes: an optional U+0020 then a run of one
      // class.
      const std::size_t body = t[i] == ' ' && i + 1 < n && cls[i + 1] != Class::kSpace ? i + 1 : i;
      if (cls[body] != Class::kSpace) {
        end = run_end(body, cls[body]);
      } else {
        // \s+(?!\S): the run of whitespace less its last character when text follows it; a single
        // whitespace character before text falls through to \s+.
        const std::size_t run = run_end(i, Class::kSpace);
        end = run == n || run - i == 1 ? run : run - 1;
      }
    }
    pieces.emplace_back(i, end);
    i = end;
  }
  return pieces;
}

}  // namespace aft
