// A product's output cut into blocks of rows by ranges of columns (engine/runtime/parallel.h):
// the cut covers every cell once at aligned starts, reads fewer bytes than columns alone where
// the weights are few beside the input rows, keeps to columns where they are many, and feeds
// more threads than a narrow output has column ranges; rows enough for a block a thread go a
// block to each member in order, as parallel_ranges' ranges do; in a region, a product's columns go
// to every member however small it is.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <vector>

#include "engine/runtime/parallel.h"
#include "kernels/thread_team.h"

namespace aft {
namespace {

// Every cell of rows x cols in exactly one part of g, each part starting at aligned rows and
// columns.
void expect_covers(const Grid& g, std::size_t rows, std::size_t row_align, std::size_t cols,
                   std::size_t col_align) {
  EXPECT_EQ(g.rows.per % row_align, 0u);
  EXPECT_EQ(g.cols.per % col_align, 0u);
  EXPECT_GE(g.rows.per * g.rows.parts, rows);
  EXPECT_LT(g.rows.per * (g.rows.parts - 1), rows) << "an empty block of rows";
  EXPECT_GE(g.cols.per * g.cols.parts, cols);
  EXPECT_LT(g.cols.per * (g.cols.parts - 1), cols) << "an empty range of columns";
}

TEST(ProductGrid, ColumnsAloneWhereTheWeightsOutweighTheRows) {
  // A 2048-wide product of 512 inputs, a 512-row prompt: 8 column ranges re-read 1 MB of
  // input rows each, where a second block of rows would re-read 4 MB of weights.
  const Grid g = product_grid(512, 32, 2048, 2048, 64, 2048, 8);
  expect_covers(g, 512, 32, 2048, 64);
  EXPECT_EQ(g.rows.parts, 1u);
  EXPECT_EQ(g.cols.parts, 8u);
}

TEST(ProductGrid, BlocksOfRowsWhereColumnsAloneReadMore) {
  // A square 512 x 512 product of a 512-row prompt, 8 parts: 2 blocks by 4 ranges read
  // 4 + 2 x 2 MB-units against 8 + 2 for 8 column ranges.
  const Grid g = product_grid(512, 32, 2048, 512, 64, 2048, 8);
  expect_covers(g, 512, 32, 512, 64);
  EXPECT_EQ(g.rows.parts, 2u);
  EXPECT_EQ(g.cols.parts, 4u);
}

TEST(ProductGrid, BlocksOfRowsWhereTheColumnsRunOut) {
  // 512 columns are 8 ranges of 64: 64 parts (16 threads) need 8 blocks of rows.
  const Grid g = product_grid(512, 32, 2048, 512, 64, 2048, 64);
  expect_covers(g, 512, 32, 512, 64);
  EXPECT_EQ(g.rows.parts * g.cols.parts, 64u);
  // A prompt of 40 rows has 2 blocks of 32: at most 2 x 8 parts.
  const Grid short_prompt = product_grid(40, 32, 2048, 512, 64, 2048, 64);
  expect_covers(short_prompt, 40, 32, 512, 64);
  EXPECT_EQ(short_prompt.rows.parts * short_prompt.cols.parts, 16u);
}

TEST(ProductGrid, OddShapesAreCoveredOnce) {
  for (std::size_t rows : {1, 31, 33, 100, 300, 513}) {
    for (std::size_t cols : {1, 63, 65, 200, 1100}) {
      for (std::size_t parts : {1, 2, 3, 8, 12, 64}) {
        for (std::size_t weight_bytes : {1, 1000, 100000}) {
          const Grid g = product_grid(rows, 32, 1000, cols, 64, weight_bytes, parts);
          expect_covers(g, rows, 32, cols, 64);
          const std::size_t columns_alone = aligned_ranges(cols, 64, parts).parts;
          EXPECT_GE(g.rows.parts * g.cols.parts, columns_alone)
              << rows << " x " << cols << ", " << parts << " parts: fewer than columns alone";
          EXPECT_LE(g.rows.parts * g.cols.parts, 2 * parts)
              << rows << " x " << cols << ", " << parts << " parts";
        }
      }
    }
  }
}

// parallel_grid's parts on 1 to 4 threads, by blocks of rows (passes of 64 rows) or by the
// product_grid cut (passes of all 300): every cell written once.
TEST(ParallelGrid, EveryCellOnceOnAnyThreadCount) {
  constexpr std::size_t kRows = 300, kCols = 200, kInputs = 512;
  for (int threads = 1; threads <= 4; ++threads) {
    for (std::size_t pass_rows : {std::size_t{64}, kRows}) {
      std::vector<std::atomic<int>> seen(kRows * kCols);
      parallel_grid(kRows, 32, kInputs * 4, kCols, 64, kInputs * 4, pass_rows, threads, kInputs,
                    [&](std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1) {
                      EXPECT_EQ(r0 % 32, 0u);
                      EXPECT_EQ(c0 % 64, 0u);
                      for (std::size_t r = r0; r < r1; ++r) {
                        for (std::size_t c = c0; c < c1; ++c) seen[r * kCols + c].fetch_add(1);
                      }
                    });
      for (std::size_t i = 0; i < seen.size(); ++i) {
        ASSERT_EQ(seen[i].load(), 1) << threads << " threads, passes of " << pass_rows
                                     << " rows, row " << i / kCols << ", column " << i % kCols;
      }
    }
  }
}

// A prompt of 512 rows on 2 and 3 threads, passes of 128 rows: a block of rows a member, block p
// on member p, every column, as parallel_ranges gives row ranges.
TEST(ParallelGrid, ABlockOfRowsOnEachMemberInOrder) {
  for (int threads : {2, 3}) {
    std::vector<std::vector<std::size_t>> parts(static_cast<std::size_t>(threads));
    parallel_grid(512, 32, 2048, 512, 64, 2048, 128, threads, 512,
                  [&](std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1) {
                    EXPECT_EQ(c0, 0u);
                    EXPECT_EQ(c1, 512u);
                    parts[static_cast<std::size_t>(kernels::ThreadTeam::this_member())] =
                        std::vector<std::size_t>{r0, r1};
                  });
    const std::size_t per = threads == 2 ? 256 : 192;  // 512 / threads, up to a multiple of 32
    for (std::size_t p = 0; p < parts.size(); ++p) {
      EXPECT_EQ(parts[p],
                (std::vector<std::size_t>{p * per, std::min<std::size_t>(512, (p + 1) * per)}))
          << threads << " threads, member " << p;
    }
  }
}

// parallel_ranges' range p runs on member p, whatever the thread count.
TEST(ParallelRanges, RangePOnMemberP) {
  for (int threads : {2, 3, 4}) {
    std::vector<std::atomic<int>> seen(1000);
    const Ranges r = split_ranges(1000, 8, threads, kMinWorkPerThread);
    ASSERT_EQ(r.parts, static_cast<std::size_t>(threads));
    parallel_ranges(1000, 8, threads, kMinWorkPerThread, [&](std::size_t begin, std::size_t end) {
      EXPECT_EQ(begin % r.per, 0u);
      EXPECT_EQ(static_cast<std::size_t>(kernels::ThreadTeam::this_member()), begin / r.per);
      for (std::size_t i = begin; i < end; ++i) seen[i].fetch_add(1);
    });
    for (std::size_t i = 0; i < seen.size(); ++i)
      ASSERT_EQ(seen[i].load(), 1) << threads << " " << i;
  }
}

// In a region, a product's columns go to every member however little work they are (a decoded
// token of a small model: each member reads the same weights at every token), range p on member
// p, covering every column once; beside it, a split of so little work outside products keeps it
// on one member.
TEST(MemberSplit, ASmallProductsColumnsGoToEveryMember) {
  for (int threads : {2, 3, 4}) {
    // 768 columns: a whole number of 64-column ranges for each of 2, 3 and 4 members.
    constexpr std::size_t kCols = 768;
    const std::size_t per = kCols / static_cast<std::size_t>(threads);
    std::vector<std::atomic<int>> seen(kCols);
    std::vector<std::atomic<int>> ranges_on(static_cast<std::size_t>(threads));
    std::atomic<int> small_ranges{0};
    kernels::ThreadTeam::of_this_thread().run(threads, [&](Team team) {
      const MemberSplit split{team};
      // One row at a cost of 1 a cell: far below kMinWorkPerThread.
      split.grid(1, 32, 4, kCols, 64, 4, 128, 1,
                 [&](std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1) {
                   EXPECT_EQ(r0, 0u);
                   EXPECT_EQ(r1, 1u);
                   EXPECT_EQ(c0 % 64, 0u);
                   EXPECT_EQ(c0, per * static_cast<std::size_t>(team.id)) << threads << " threads";
                   EXPECT_EQ(c1, c0 + per);
                   ranges_on[static_cast<std::size_t>(team.id)].fetch_add(1);
                   for (std::size_t c = c0; c < c1; ++c) seen[c].fetch_add(1);
                 });
      split.ranges(kCols, 64, 1, [&](std::size_t, std::size_t) { small_ranges.fetch_add(1); });
    });
    for (std::size_t c = 0; c < seen.size(); ++c)
      ASSERT_EQ(seen[c].load(), 1) << threads << " " << c;
    for (int m = 0; m < threads; ++m) {
      EXPECT_EQ(ranges_on[static_cast<std::size_t>(m)].load(), 1) << "member " << m;
    }
    EXPECT_EQ(small_ranges.load(), 1) << "work this small stays on one member outside products";
  }
}

TEST(ParallelGrid, ANarrowOutputsRowsFeedEveryThread) {
  // 64 columns are one range: the rows alone can keep 4 threads busy.
  std::atomic<std::size_t> parts{0};
  parallel_grid(512, 32, 2048, 64, 64, 2048, 512, 4, 512,
                [&](std::size_t, std::size_t, std::size_t c0, std::size_t c1) {
                  EXPECT_EQ(c0, 0u);
                  EXPECT_EQ(c1, 64u);
                  parts.fetch_add(1);
                });
  EXPECT_EQ(parts.load(), std::min<std::size_t>(16, 4 * kRangesPerThread))
      << "4 threads x kRangesPerThread blocks of rows (16 at most)";
}

}  // namespace
}  // namespace aft
