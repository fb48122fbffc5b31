// The session state's checksum: every single-bit change and every length change is seen.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "models/aft/state_checksum.h"

namespace aft {
namespace {

TEST(StateChecksum, EveryBitFlipChangesIt) {
  for (std::size_t size : {1, 7, 8, 31, 32, 33, 100}) {
    std::vector<unsigned char> bytes(size);
    for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<unsigned char>(i * 37 + 11);
    const uint64_t original = state_checksum(bytes.data(), size);
    for (std::size_t i = 0; i < size; ++i) {
      for (int bit = 0; bit < 8; ++bit) {
        bytes[i] ^= static_cast<unsigned char>(1 << bit);
        EXPECT_NE(state_checksum(bytes.data(), size), original) << size << ": byte " << i;
        bytes[i] ^= static_cast<unsigned char>(1 << bit);
      }
    }
  }
}

// Zero bytes appended (or a shorter prefix of zeros) change it: the length is mixed in.
TEST(StateChecksum, LengthMatters) {
  const std::vector<unsigned char> zeros(80, 0);
  std::set<uint64_t> seen;
  for (std::size_t size = 0; size <= zeros.size(); ++size) {
    EXPECT_TRUE(seen.insert(state_checksum(zeros.data(), size)).second) << size;
  }
}

}  // namespace
}  // namespace aft
