#include "state_checksum.h"

#include <cstring>

namespace aft {
namespace {

constexpr uint64_t kScale = 0x9E3779B97F4A7C15ull;  // odd: multiplying by it is a bijection
constexpr uint64_t kMix = 0xBF58476D1CE4E5B9ull;    // odd
constexpr uint64_t kFinal = 0x94D049BB133111EBull;  // odd

uint64_t rotate_left(uint64_t x, int bits) { return (x << bits) | (x >> (64 - bits)); }

uint64_t step(uint64_t lane, uint64_t word) {
  return rotate_left(lane ^ (word * kScale), 31) * kMix;
}

uint64_t load_word(const unsigned char* p) {
  uint64_t word;
  std::memcpy(&word, p, sizeof(word));
  return word;
}

}  // namespace

uint64_t state_checksum(const void* data, std::size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t lanes[4] = {1, 2, 3, 4};
  std::size_t at = 0;
  for (; at + 32 <= size; at += 32) {
    for (int i = 0; i < 4; ++i) lanes[i] = step(lanes[i], load_word(p + at + 8 * i));
  }
  for (int i = 0; at + 8 <= size; at += 8, ++i) lanes[i] = step(lanes[i], load_word(p + at));
  unsigned char tail[8] = {};
  if (at < size) std::memcpy(tail, p + at, size - at);
  uint64_t h = step(size, load_word(tail));
  for (uint64_t lane : lanes) h = step(h, lane);
  h ^= h >> 33;
  h *= kFinal;
  return h ^ (h >> 29);
}

}  // namespace aft
