// CRC-32 with the ARMv8 CRC32 instructions, which compute exactly this polynomial (CRC32X: eight
// bytes per instruction on the inverted register, as the table update). The target attribute keeps
// the library buildable for any aarch64; crc32.cpp calls this only when HWCAP_CRC32 is set.
#include <arm_acle.h>
#include <asm/hwcap.h>
#include <sys/auxv.h>

#include <cstring>

#include "crc32_paths.h"

namespace aft::crc32_paths {

bool has_armv8_crc() { return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0; }

__attribute__((target("+crc"))) uint32_t armv8_crc(const void* data, std::size_t size,
                                                   uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  for (; size >= 32; size -= 32, p += 32) {
    uint64_t w[4];
    std::memcpy(w, p, sizeof w);  // aarch64 Linux is little-endian: byte 0 is shifted in first
    c = __crc32d(__crc32d(__crc32d(__crc32d(c, w[0]), w[1]), w[2]), w[3]);
  }
  for (; size >= 8; size -= 8, p += 8) {
    uint64_t w;
    std::memcpy(&w, p, sizeof w);
    c = __crc32d(c, w);
  }
  for (; size > 0; --size, ++p) c = __crc32b(c, *p);
  return ~c;
}

}  // namespace aft::crc32_paths
