// aft-crc32-bench: the speed of each CRC-32 path this CPU runs (engine/format/crc32_paths.h), in
// GB/s over one buffer, the best of a few passes (docs/benchmarks.md, "Loading").
// Usage: aft-crc32-bench [megabytes] (default 1024)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "engine/format/crc32_paths.h"

int main(int argc, char** argv) {
  const std::size_t megabytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024;
  std::vector<uint8_t> buf(megabytes << 20);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  std::printf("%zu MB, the best of 3 passes; crc32() uses %s\n", megabytes,
              aft::crc32_paths::active().name);
  for (const auto* path = aft::crc32_paths::begin(); path != aft::crc32_paths::end(); ++path) {
    if (!path->supported()) {
      std::printf("%-10s not on this CPU\n", path->name);
      continue;
    }
    double best = 1e30;
    uint32_t crc = 0;
    for (int pass = 0; pass < 3; ++pass) {
      const auto start = std::chrono::steady_clock::now();
      crc = path->function(buf.data(), buf.size(), 0);
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      best = std::min(best, took.count());
    }
    std::printf("%-10s %6.2f GB/s  (crc 0x%08x)\n", path->name, buf.size() / best / 1e9, crc);
  }
  return 0;
}
