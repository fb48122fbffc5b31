// aft-gemv-bench and aft-crc32-bench as a user meets them: --help, bad command lines refused with
// exit code 2 and a message that names the argument, and the CRC-32 paths agreeing on a buffer.
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "run_command.h"

namespace aft::testing {
namespace {

// Each case's arguments: exit status 2, nothing on stdout, the message and the usage on stderr.
void expect_usage_errors(const char* program, const char* usage,
                         const std::vector<std::pair<const char*, const char*>>& cases) {
  for (const auto& [args, message] : cases) {
    const CommandResult r = run_command(program, args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
    EXPECT_NE(r.err.find(usage), std::string::npos) << args;
    EXPECT_EQ(r.out, "") << args;
  }
}

TEST(KernelBenches, HelpExitsWithZero) {
  const CommandResult gemv = run_command(AFT_GEMV_BENCH_PATH, "--help");
  EXPECT_EQ(gemv.exit_code, 0);
  EXPECT_NE(gemv.out.find("usage: aft-gemv-bench"), std::string::npos);
  const CommandResult crc = run_command(AFT_CRC32_BENCH_PATH, "-h");
  EXPECT_EQ(crc.exit_code, 0);
  EXPECT_NE(crc.out.find("usage: aft-crc32-bench"), std::string::npos);
}

TEST(KernelBenches, GemvBenchUsageErrorsExitWithTwo) {
  expect_usage_errors(
      AFT_GEMV_BENCH_PATH, "usage: aft-gemv-bench",
      {
          {"--bogus", "unknown option --bogus"},
          {"512", "expected ROWS COLS [ISA], found 1 argument"},
          {"512 512 scalar extra", "found 4 arguments"},
          {"0 512", "ROWS: expected an integer in [1, 65536], found \"0\""},
          {"512 abc", "COLS: expected an integer"},
          {"512 500", "COLS: expected a multiple of 32, found 500"},
          {"512 512 avx9", "ISA: expected one of the names below, found \"avx9\""},
          {"--type q4", "--type: expected one of f32, bf16, bf16x, q8_0, found \"q4\""},
          {"--where disk", "--where: expected one of cache, memory, found \"disk\""},
          {"--passes 0", "--passes: expected an integer in [1, 10000], found \"0\""},
          {"--type", "--type: missing value"},
      });
}

// --type and --where leave one row of figures: that type, in that place, for each vector count.
TEST(KernelBenches, GemvBenchFiltersToOneTypeAndPlace) {
  const CommandResult r =
      run_command(AFT_GEMV_BENCH_PATH, "64 64 scalar --type q8_0 --where cache --passes 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::vector<std::string> rows;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| scalar |", 0) == 0) rows.push_back(line);
  }
  ASSERT_EQ(rows.size(), 1u) << r.out;
  EXPECT_EQ(rows[0].rfind("| scalar | q8_0 | cache, GFLOP/s |", 0), 0u) << rows[0];
  std::size_t figures = 0;
  for (std::size_t at = rows[0].find(" |"); at != std::string::npos;
       at = rows[0].find(" |", at + 1)) {
    ++figures;
  }
  EXPECT_EQ(figures, 3u + 5u) << rows[0];  // isa, type, place, then x1 to x16
}

TEST(KernelBenches, Crc32BenchUsageErrorsExitWithTwo) {
  expect_usage_errors(AFT_CRC32_BENCH_PATH, "usage: aft-crc32-bench",
                      {
                          {"--bogus", "unknown option --bogus"},
                          {"0", "MEGABYTES: expected an integer in [1, 65536], found \"0\""},
                          {"1x", "MEGABYTES: expected an integer"},
                          {"1 2", "unexpected argument \"2\""},
                      });
}

// Every path this CPU runs prints its speed and the same checksum of the buffer.
TEST(KernelBenches, Crc32PathsAgree) {
  const CommandResult r = run_command(AFT_CRC32_BENCH_PATH, "1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  std::set<std::string> checksums;
  int measured = 0;
  while (std::getline(lines, line)) {
    const std::size_t crc = line.find("(crc 0x");
    if (crc == std::string::npos) continue;
    ++measured;
    checksums.insert(line.substr(crc));
  }
  EXPECT_GE(measured, 1) << r.out;  // the table path runs everywhere
  EXPECT_EQ(checksums.size(), 1u) << r.out;
}

}  // namespace
}  // namespace aft::testing
