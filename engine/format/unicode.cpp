#include "unicode.h"

#include <algorithm>

#include "unicode_tables.h"

namespace aft::unicode {
namespace {

using namespace unicode_data;

// Hangul syllables compose and decompose by arithmetic (Unicode 3.12).
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

bool in_ranges(const Range* table, std::size_t count, uint32_t cp) {
  const Range* end = table + count;
  const Range* it =
      std::upper_bound(table, end, cp, [](uint32_t c, const Range& r) { return c < r.first; });
  return it != table && cp <= (it - 1)->last;
}

void decompose(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (cp >= 0xC0) {
    const Decomposition* end = kDecompositions + kDecompositionCount;
    const Decomposition* it =
        std::lower_bound(kDecompositions, end, cp,
                         [](const Decomposition& d, uint32_t c) { return d.code_point < c; });
    if (it != end && it->code_point == cp) {
      out.insert(out.end(), kDecomposed + it->offset, kDecomposed + it->offset + it->length);
      return;
    }
  }
  out.push_back(cp);
}

// The primary composite of a + b, or 0.
uint32_t compose(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  }
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount) {
    return a + (b - kTBase);
  }
  const Composition* end = kCompositions + kCompositionCount;
  const Composition* it =
      std::lower_bound(kCompositions, end, std::make_pair(a, b),
                       [](const Composition& c, std::pair<uint32_t, uint32_t> key) {
                         return c.first != key.first ? c.first < key.first : c.second < key.second;
                       });
  return it != end && it->first == a && it->second == b ? it->composite : 0;
}

}  // namespace

bool is_letter(uint32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return in_ranges(kLetters, kLetterCount, cp);
}

bool is_number(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return in_ranges(kNumbers, kNumberCount, cp);
}

bool is_whitespace(uint32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

uint8_t combining_class(uint32_t cp) {
  if (cp < 0x300) return 0;
  const CombiningClass* end = kCombiningClasses + kCombiningClassCount;
  const CombiningClass* it = std::upper_bound(
      kCombiningClasses, end, cp, [](uint32_t c, const CombiningClass& r) { return c < r.first; });
  return it != kCombiningClasses && cp <= (it - 1)->last ? (it - 1)->value : 0;
}

std::vector<uint32_t> nfc(const std::vector<uint32_t>& text) {
  std::vector<uint32_t> d;
  d.reserve(text.size());
  for (const uint32_t cp : text) decompose(cp, d);
  // Canonical order: each run of non-starters sorted stably by class.
  for (std::size_t i = 0; i < d.size();) {
    if (combining_class(d[i]) == 0) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < d.size() && combining_class(d[j]) != 0) ++j;
    std::stable_sort(
        d.begin() + static_cast<std::ptrdiff_t>(i), d.begin() + static_cast<std::ptrdiff_t>(j),
        [](uint32_t a, uint32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
  // Canonical composition: a character joins the last starter unless blocked (a character between
  // them of class 0 or of a class not below its own).
  std::vector<uint32_t> out;
  out.reserve(d.size());
  std::size_t starter = SIZE_MAX;
  uint8_t last_class = 0;
  for (const uint32_t cp : d) {
    const uint8_t cc = combining_class(cp);
    if (starter != SIZE_MAX) {
      const bool adjacent = out.size() - 1 == starter;
      if (adjacent || (last_class != 0 && last_class < cc)) {
        const uint32_t composite = compose(out[starter], cp);
        if (composite != 0) {
          out[starter] = composite;
          continue;
        }
      }
    }
    if (cc == 0) starter = out.size();
    out.push_back(cp);
    last_class = cc;
  }
  return out;
}

const char* version() { return kVersion; }

}  // namespace aft::unicode
