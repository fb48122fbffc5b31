// The AFT state's channel-blocked rows (models/aft/channel_blocked_rows.h): where each channel of a
// row lives, that growing keeps the rows already stored and zeroes the others, where the memory
// lies, and how many rows a layer's state grows to (MixerState::rows_for).
#include "models/aft/channel_blocked_rows.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/huge_page_buffer.h"
#include "models/aft/session_state.h"

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

void store_row(ChannelBlockedRows& rows, std::size_t r, std::size_t width) {
  const std::vector<float> values = numbered_row(r, width);
  for (std::size_t b = 0; b < rows.blocks(); ++b) rows.store(r, b, values.data());
}

// 150 channels: two whole blocks and a tail of 22.
TEST(ChannelBlockedRows, StoresEachChannelInItsBlock) {
  constexpr std::size_t kWidth = 150;
  ChannelBlockedRows rows;
  rows.resize(5, kWidth);
  ASSERT_EQ(rows.blocks(), 3u);
  EXPECT_EQ(ChannelBlockedRows::block_width(kWidth, 2), 22u);
  // Block by block, the last first: each store writes its block alone.
  for (std::size_t b = rows.blocks(); b-- > 0;) {
    for (std::size_t r = 0; r < 5; ++r) rows.store(r, b, numbered_row(r, kWidth).data());
  }
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
  for (std::size_t r = 0; r < 3; ++r) store_row(rows, r, kWidth);
  rows.resize(7, kWidth);
  EXPECT_EQ(rows.rows(), 7u);
  expect_numbered(rows, 3);
  for (std::size_t r = 3; r < 7; ++r) store_row(rows, r, kWidth);
  expect_numbered(rows, 7);
}

TEST(ChannelBlockedRows, NewRowsAreZero) {
  constexpr std::size_t kWidth = 200;
  ChannelBlockedRows rows;
  rows.resize(2, kWidth);
  for (std::size_t r = 0; r < 2; ++r) store_row(rows, r, kWidth);
  // 2 MiB and more: the huge-page path of its allocator.
  const std::size_t grown = kernels::kHugePageBytes / ChannelBlockedRows::row_bytes(kWidth) + 5;
  rows.resize(grown, kWidth);
  expect_numbered(rows, 2);
  for (std::size_t block = 0; block < rows.blocks(); ++block) {
    for (std::size_t r = 2; r < grown; ++r) {
      for (std::size_t c = 0; c < ChannelBlockedRows::kBlock; ++c) {
        ASSERT_EQ(rows.row(r, block)[c], 0.0f) << "row " << r << ", block " << block;
      }
    }
  }
}

// From 2 MiB on an array starts at a 2 MiB boundary (its whole 2 MiB pages can be huge ones);
// smaller ones at a cache line.
TEST(ChannelBlockedRows, LargeArraysStartOnA2MiBBoundary) {
  for (const std::size_t floats :
       {std::size_t{1000}, kernels::kHugePageBytes / sizeof(float) - 16,
        kernels::kHugePageBytes / sizeof(float), 3 * kernels::kHugePageBytes / sizeof(float) + 7}) {
    std::vector<float, kernels::HugePageAllocator<float>> array(floats, 1.0f);
    const auto address = reinterpret_cast<std::uintptr_t>(array.data());
    const std::size_t alignment =
        floats * sizeof(float) >= kernels::kHugePageBytes ? kernels::kHugePageBytes : 64;
    EXPECT_EQ(address % alignment, 0u) << floats << " floats";
    EXPECT_EQ(array.back(), 1.0f);
  }
}

// An array of 2 MiB or more, freed, is what the next allocation of its size gets (its pages are in
// memory already); another size gets other memory.
TEST(ChannelBlockedRows, AFreedLargeArrayServesTheNextOfItsSize) {
  constexpr std::size_t kBytes = 3 * kernels::kHugePageBytes;
  void* first = kernels::allocate_on_huge_pages(kBytes);
  kernels::free_on_huge_pages(first, kBytes);
  void* other = kernels::allocate_on_huge_pages(kBytes + 4096);
  void* again = kernels::allocate_on_huge_pages(kBytes);
  EXPECT_EQ(again, first);
  EXPECT_NE(other, first);
  kernels::free_on_huge_pages(other, kBytes + 4096);
  kernels::free_on_huge_pages(again, kBytes);
}

// A state of d channels whose keys have `had` rows, up to `capacity`.
MixerState state_with_rows(std::size_t d, std::size_t had, std::size_t capacity) {
  MixerState state;
  state.m.resize(d);
  state.keys.resize(had, d);
  state.capacity = capacity;
  return state;
}

TEST(MixerStateRows, GrowFrom256KiBByDoublingAndFromHalfA2MiBPageToWholePages) {
  // d = 512: 2 KiB a row, a 2 MiB page holds 1024.
  EXPECT_EQ(state_with_rows(512, 0, 4096).rows_for(0), 0u);
  EXPECT_EQ(state_with_rows(512, 0, 4096).rows_for(10), 128u);     // at least 256 KiB
  EXPECT_EQ(state_with_rows(512, 0, 32).rows_for(1), 32u);         // a window's ring, at once
  EXPECT_EQ(state_with_rows(512, 200, 4096).rows_for(300), 400u);  // doubled, 800 KiB
  EXPECT_EQ(state_with_rows(512, 200, 4096).rows_for(150), 200u);  // never fewer
  EXPECT_EQ(state_with_rows(512, 0, 4096).rows_for(512), 1024u);   // 1 MiB: a whole page
  EXPECT_EQ(state_with_rows(512, 300, 4096).rows_for(301), 1024u);
  EXPECT_EQ(state_with_rows(512, 1024, 4096).rows_for(1025), 2048u);
  EXPECT_EQ(state_with_rows(512, 0, 4096).rows_for(1500), 2048u);
  EXPECT_EQ(state_with_rows(512, 0, 700).rows_for(512), 700u);  // the capacity
  EXPECT_EQ(state_with_rows(512, 0, 700).rows_for(5000), 700u);
  // d = 768: 3 KiB a row, which 2 MiB is no multiple of: the rows that fit.
  EXPECT_EQ(state_with_rows(768, 0, 4096).rows_for(400), 682u);
  // d = 100, two blocks: 512 bytes a row.
  EXPECT_EQ(state_with_rows(100, 0, 100000).rows_for(2048), 4096u);
  EXPECT_EQ(state_with_rows(100, 0, 100000).rows_for(2047), 2047u);
}

}  // namespace
}  // namespace aft
