// The CRC-32 implementations behind crc32(), one per instruction set, for crc32.cpp's run-time
// choice and for the tests and the benchmark, which force each one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace aft::crc32_paths {

// Every path computes exactly crc32()'s value (zlib's, with its continuation semantics).
using Function = uint32_t (*)(const void* data, std::size_t size, uint32_t crc);

struct Path {
  const char* name;  // "table", "pclmul", "vpclmul" or "armv8-crc"
  Function function;
  bool (*supported)();  // whether this build and CPU can run it
};

// Every path of this build, the portable table last.
const Path* begin();
const Path* end();

// The path crc32() uses: the fastest the CPU runs, within the instruction sets AFT_ISA allows
// (kernels/dispatch.cpp): "scalar" or "sse2" force the table, "avx2" carry-less multiplication on
// 128-bit registers, "avx512" and "avx512vnni" on 512-bit ones where the CPU has them, "neon" the
// ARMv8 CRC32 instructions.
const Path& active();

// The path for the kernels' instruction set `isa` (kernels::KernelTable::isa): the fastest this CPU
// runs among those it allows. Exposed so that tests can check the rule without the environment.
const Path& for_isa(const char* isa);

// The slicing-by-16 update on the inverted register (no complement in or out): what the vector
// paths use for their short heads and tails.
uint32_t table_update(uint32_t state, const uint8_t* p, std::size_t size);
uint32_t table(const void* data, std::size_t size, uint32_t crc);

#if defined(__x86_64__)
bool has_pclmul();
bool has_vpclmul();
uint32_t pclmul(const void* data, std::size_t size, uint32_t crc);
uint32_t vpclmul(const void* data, std::size_t size, uint32_t crc);
#endif
#if defined(__aarch64__)
bool has_armv8_crc();
uint32_t armv8_crc(const void* data, std::size_t size, uint32_t crc);
#endif

}  // namespace aft::crc32_paths
