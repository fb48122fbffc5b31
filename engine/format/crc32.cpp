// crc32(): the run-time choice among the paths of crc32_paths.h.
#include "crc32.h"

#include <cstring>
#include <iterator>

#include "crc32_paths.h"
#include "kernels/kernels.h"

namespace aft {
namespace crc32_paths {
namespace {

bool always() { return true; }

// Fastest first.
constexpr Path kPaths[] = {
#if defined(__x86_64__)
    {"vpclmul", vpclmul, has_vpclmul},
    {"pclmul", pclmul, has_pclmul},
#endif
#if defined(__aarch64__)
    {"armv8-crc", armv8_crc, has_armv8_crc},
#endif
    {"table", table, always},
};

// The fastest CRC path an instruction set of the kernels allows.
const char* widest_for(const char* isa) {
  // avx512 and the tables built on it: avx512vnni, avx512bf16, avx512amx.
  if (std::strncmp(isa, "avx512", 6) == 0) return "vpclmul";
  if (std::strcmp(isa, "avx2") == 0) return "pclmul";
  if (std::strcmp(isa, "neon") == 0) return "armv8-crc";
  return "table";  // scalar, sse2
}

}  // namespace

const Path* begin() { return std::begin(kPaths); }
const Path* end() { return std::end(kPaths); }

const Path& for_isa(const char* isa) {
  const char* widest = widest_for(isa);
  bool allowed = false;
  for (const Path& path : kPaths) {
    allowed = allowed || std::strcmp(path.name, widest) == 0;
    if (allowed && path.supported()) return path;
  }
  return std::end(kPaths)[-1];
}

const Path& active() {
  // The kernels have already parsed AFT_ISA and fallen back to what this CPU runs; following their
  // choice keeps one reading of the variable and one warning.
  static const Path& path = for_isa(kernels::active_kernels().isa);
  return path;
}

}  // namespace crc32_paths

uint32_t crc32(const void* data, std::size_t size, uint32_t crc) {
  return crc32_paths::active().function(data, size, crc);
}

}  // namespace aft
