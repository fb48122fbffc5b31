// CRC-32 (ISO-HDLC: reflected polynomial 0xEDB88320, the checksum of zlib, PNG and gzip).
#pragma once

#include <cstddef>
#include <cstdint>

namespace aft {

// The CRC-32 of `size` bytes, continuing from `crc` (the result of the previous chunk, 0 to start),
// so crc32(b, nb, crc32(a, na)) == crc32 of a followed by b, as zlib's crc32().
uint32_t crc32(const void* data, std::size_t size, uint32_t crc = 0);

}  // namespace aft
