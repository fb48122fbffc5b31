// The AFT state's channel-blocked rows (models/aft/channel_blocked_rows.h): where each channel of a
// row lives, and that growing keeps the rows already stored.
#include "models/aft/channel_blocked_rows.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace aft {
namespace {

// Row r, channel c holds 1000 r + c.
std::vector<float> numbered_row(std::size_t r, std::size_t width) {
  std::vector<float> row(width);
  for (std::size_t c = 0; c < width; ++c) row[c] = static_cast<float>(1000 * r + c);
  return row;
}

void expect_numbered(const ChannelBlockedRows& rows, std::size_t count) {
  for (std::size_t r = 0; r < count; ++r) {
    for (std::size_t c = 0; c < rows.width(); ++c) {
      const std::size_t block = c / ChannelBlockedRows::kBlock;
      ASSERT_EQ(rows.row(r, block)[c % ChannelBlockedRows::kBlock], 1000.0f * r + c)
          << "row " << r << ", channel " << c;
    }
  }
}

// 150 channels: two whole blocks and a tail of 22.
TEST(ChannelBlockedRows, StoresEachChannelInItsBlock) {
  constexpr std::size_t kWidth = 150;
  ChannelBlockedRows rows;
  rows.resize(5, kWidth);
  ASSERT_EQ(rows.blocks(), 3u);
  EXPECT_EQ(ChannelBlockedRows::block_width(kWidth, 2), 22u);
  for (std::size_t r = 0; r < 5; ++r) rows.store(r, numbered_row(r, kWidth).data());
  expect_numbered(rows, 5);
  // A block's rows are contiguous, kBlock floats apart, and rows are 64-byte aligned.
  EXPECT_EQ(rows.row(1, 1) - rows.row(0, 1),
            static_cast<std::ptrdiff_t>(ChannelBlockedRows::kBlock));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(rows.row(3, 2)) % 64, 0u);
}

TEST(ChannelBlockedRows, GrowingKeepsStoredRows) {
  constexpr std::size_t kWidth = 130;
  ChannelBlockedRows rows;
  rows.resize(3, kWidth);
  for (std::size_t r = 0; r < 3; ++r) rows.store(r, numbered_row(r, kWidth).data());
  rows.resize(7, kWidth);
  EXPECT_EQ(rows.rows(), 7u);
  expect_numbered(rows, 3);
  for (std::size_t r = 3; r < 7; ++r) rows.store(r, numbered_row(r, kWidth).data());
  expect_numbered(rows, 7);
}

}  // namespace
}  // namespace aft
