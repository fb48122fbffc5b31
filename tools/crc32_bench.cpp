// aft-crc32-bench: the speed of each CRC-32 path this CPU runs (engine/format/crc32_paths.h), in
// GB/s over one buffer, the best of a few passes (docs/benchmarks.md, "Loading").
// Usage: aft-crc32-bench [megabytes] (default 1024; --help)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "engine/format/crc32_paths.h"
#include "tools/cli/arguments.h"

namespace {

constexpr const char* kUsage =
    "usage: aft-crc32-bench [MEGABYTES]\n"
    "\n"
    "GB/s of each CRC-32 path this CPU runs over a buffer of MEGABYTES (default 1024).\n";

// The buffer's size in MiB, or nothing for --help.
std::optional<std::size_t> parse_args(int argc, char** argv) {
  std::optional<std::size_t> megabytes;
  aft::cli::Arguments args(argc, argv);
  while (args.next()) {
    if (args.help()) return std::nullopt;
    const std::string& arg = args.positional();
    if (megabytes) throw aft::cli::UsageError("unexpected argument \"" + arg + "\"");
    megabytes = static_cast<std::size_t>(aft::cli::parse_integer("MEGABYTES", arg, 1, 1 << 16));
  }
  return megabytes.value_or(1024);
}

int run_benchmark(std::size_t megabytes) {
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

}  // namespace

int main(int argc, char** argv) {
  return aft::cli::tool_main(
      "aft-crc32-bench", kUsage, [&] { return parse_args(argc, argv); }, run_benchmark);
}
