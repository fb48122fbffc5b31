// The portable CRC-32: slicing-by-16, sixteen tables so one step consumes 16 bytes with 16
// independent look-ups (the byte-wise loop has a dependency chain through every byte).
#include <array>

#include "crc32_paths.h"

namespace aft::crc32_paths {
namespace {

constexpr uint32_t kPoly = 0xEDB88320u;  // x^32 + x^26 + ... + 1, bit-reflected
constexpr int kSlices = 16;

// t[0][b] is the register after shifting byte b through it; t[k][b] that after k more zero bytes,
// so byte i of a 16-byte block is looked up in t[15 - i].
struct Tables {
  std::array<std::array<uint32_t, 256>, kSlices> t{};
};

constexpr Tables make_tables() {
  Tables tables;
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c & 1u) ? (c >> 1) ^ kPoly : c >> 1;
    tables.t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i) {
    for (int k = 1; k < kSlices; ++k) {
      const uint32_t prev = tables.t[k - 1][i];
      tables.t[k][i] = (prev >> 8) ^ tables.t[0][prev & 0xFFu];
    }
  }
  return tables;
}

constexpr Tables kTables = make_tables();

// Assembled byte by byte so the result does not depend on the host's endianness or alignment.
inline uint32_t load_le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

}  // namespace

uint32_t table_update(uint32_t c, const uint8_t* p, std::size_t size) {
  const auto& t = kTables.t;
  for (; size >= 16; size -= 16, p += 16) {
    const uint32_t w0 = load_le32(p) ^ c;
    const uint32_t w1 = load_le32(p + 4);
    const uint32_t w2 = load_le32(p + 8);
    const uint32_t w3 = load_le32(p + 12);
    c = t[15][w0 & 0xFF] ^ t[14][(w0 >> 8) & 0xFF] ^ t[13][(w0 >> 16) & 0xFF] ^ t[12][w0 >> 24] ^
        t[11][w1 & 0xFF] ^ t[10][(w1 >> 8) & 0xFF] ^ t[9][(w1 >> 16) & 0xFF] ^ t[8][w1 >> 24] ^
        t[7][w2 & 0xFF] ^ t[6][(w2 >> 8) & 0xFF] ^ t[5][(w2 >> 16) & 0xFF] ^ t[4][w2 >> 24] ^
        t[3][w3 & 0xFF] ^ t[2][(w3 >> 8) & 0xFF] ^ t[1][(w3 >> 16) & 0xFF] ^ t[0][w3 >> 24];
  }
  for (; size > 0; --size, ++p) c = (c >> 8) ^ t[0][(c ^ *p) & 0xFF];
  return c;
}

uint32_t table(const void* data, std::size_t size, uint32_t crc) {
  return ~table_update(~crc, static_cast<const uint8_t*>(data), size);
}

}  // namespace aft::crc32_paths
