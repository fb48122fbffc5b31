// CRC-32: every path this build has (crc32_paths.h) that the CPU runs, each called directly,
// against a bitwise reference; and crc32() itself, whichever path AFT_ISA and the CPU chose.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/format/crc32.h"
#include "engine/format/crc32_paths.h"

namespace {

namespace paths = aft::crc32_paths;

// The definition, one bit at a time, continuing from `crc` as zlib does.
uint32_t bitwise_crc32(const uint8_t* p, std::size_t n, uint32_t crc = 0) {
  uint32_t c = ~crc;
  for (std::size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
  }
  return ~c;
}

std::vector<uint8_t> random_bytes(std::size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(n);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

// The paths to test: crc32() as chosen, then every path this CPU runs; says which ran.
std::vector<paths::Path> runnable_paths() {
  std::vector<paths::Path> runnable = {{"crc32()", aft::crc32, nullptr}};
  for (const paths::Path* path = paths::begin(); path != paths::end(); ++path) {
    if (path->supported()) {
      runnable.push_back(*path);
    } else {
      std::printf("crc32 path %s: not on this CPU, skipped\n", path->name);
    }
  }
  return runnable;
}

class Crc32 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { std::printf("crc32() uses the %s path\n", paths::active().name); }
  const std::vector<paths::Path> paths_ = runnable_paths();
};

TEST_F(Crc32, KnownValues) {
  const char* fox = "The quick brown fox jumps over the lazy dog";
  for (const paths::Path& path : paths_) {
    SCOPED_TRACE(path.name);
    EXPECT_EQ(path.function("", 0, 0), 0u);
    EXPECT_EQ(path.function("123456789", 9, 0), 0xCBF43926u);
    EXPECT_EQ(path.function(fox, std::strlen(fox), 0), 0x414FA339u);
    const std::vector<uint8_t> zeros(4096, 0);
    EXPECT_EQ(path.function(zeros.data(), zeros.size(), 0), bitwise_crc32(zeros.data(), 4096));
  }
}

TEST_F(Crc32, MatchesBitwiseAtEveryLengthAndAlignment) {
  constexpr std::size_t kMaxLength = 5000, kOffsets = 64;
  const std::vector<uint8_t> buf = random_bytes(kMaxLength + kOffsets, 1);
  // The reference of every prefix from every offset, one bitwise pass per offset.
  std::vector<std::vector<uint32_t>> expected(kOffsets);
  for (std::size_t start = 0; start < kOffsets; ++start) {
    expected[start].push_back(0);
    for (std::size_t n = 1; n <= kMaxLength; ++n) {
      expected[start].push_back(bitwise_crc32(&buf[start + n - 1], 1, expected[start].back()));
    }
  }
  for (const paths::Path& path : paths_) {
    std::printf("crc32 path %s: lengths 0..%zu at offsets 0..%zu\n", path.name, kMaxLength,
                kOffsets - 1);
    // Every length, each at one offset; every offset for the lengths around the blocks' sizes.
    for (std::size_t n = 0; n <= kMaxLength; ++n) {
      const std::size_t start = (n * 7) % kOffsets;
      ASSERT_EQ(path.function(&buf[start], n, 0), expected[start][n]) << path.name << " " << n;
    }
    for (std::size_t start = 0; start < kOffsets; ++start) {
      for (std::size_t n = 0; n <= kMaxLength; n += (n < 600 ? 1 : 97)) {
        ASSERT_EQ(path.function(&buf[start], n, 0), expected[start][n])
            << path.name << " " << start << " " << n;
      }
    }
  }
}

TEST_F(Crc32, MatchesBitwiseOnMegabytes) {
  const std::vector<uint8_t> buf = random_bytes((3 << 20) + 13, 2);
  const uint32_t expected = bitwise_crc32(buf.data() + 3, buf.size() - 3);
  for (const paths::Path& path : paths_) {
    EXPECT_EQ(path.function(buf.data() + 3, buf.size() - 3, 0), expected) << path.name;
  }
}

TEST_F(Crc32, ContinuesAcrossRandomSplits) {
  const std::vector<uint8_t> buf = random_bytes(200000, 3);
  const uint32_t whole = bitwise_crc32(buf.data(), buf.size());
  std::mt19937 rng(4);
  for (const paths::Path& path : paths_) {
    for (int trial = 0; trial < 20; ++trial) {
      // Chunks of 0 bytes to several blocks, with some long ones.
      const std::size_t max_chunk = trial % 2 ? 700 : 70000;
      uint32_t crc = 0;
      for (std::size_t at = 0; at < buf.size();) {
        const std::size_t n = std::min<std::size_t>(rng() % (max_chunk + 1), buf.size() - at);
        crc = path.function(buf.data() + at, n, crc);
        at += n;
      }
      ASSERT_EQ(crc, whole) << path.name << " trial " << trial;
    }
  }
}

TEST(Crc32Choice, FollowsTheKernelsInstructionSet) {
  EXPECT_STREQ(paths::for_isa("scalar").name, "table");
  EXPECT_STREQ(paths::for_isa("sse2").name, "table");
  // The widest path the instruction set allows that this CPU runs.
  const auto first_runnable = [](std::initializer_list<const char*> names) -> std::string {
    for (const char* name : names) {
      for (const paths::Path* path = paths::begin(); path != paths::end(); ++path) {
        if (std::strcmp(path->name, name) == 0 && path->supported()) return name;
      }
    }
    return "table";
  };
#if defined(__x86_64__)
  EXPECT_EQ(paths::for_isa("avx512vnni").name, first_runnable({"vpclmul", "pclmul"}));
  EXPECT_EQ(paths::for_isa("avx512").name, first_runnable({"vpclmul", "pclmul"}));
  EXPECT_EQ(paths::for_isa("avx2").name, first_runnable({"pclmul"}));
  EXPECT_STREQ(paths::for_isa("neon").name, "table");
#endif
#if defined(__aarch64__)
  EXPECT_EQ(paths::for_isa("neon").name, first_runnable({"armv8-crc"}));
  EXPECT_STREQ(paths::for_isa("avx512").name, "table");
#endif
}

}  // namespace
