// Splits [0, n) into contiguous ranges over the threads of the caller's team
// (kernels/thread_team.h). Range starts are multiples of `align`, so a kernel sees the same lane
// and tail layout for every item whatever the thread count and whichever thread takes the range:
// results depend on neither.
#pragma once

#include <algorithm>
#include <cstddef>

#include "kernels/thread_team.h"

namespace aft {

// Work below this many units (about one multiply-add each) per thread costs less than waking a
// thread: small ops run on fewer threads. A run of the thread team costs ~0.2 us on 2 cores
// (aft-bench's "parallel region"; OpenMP's cost 2.8, when this was 2^17). Measured on a Zen 4 at
// 2 threads (docs/benchmarks.md): 2^14 took a batch of 16 q8_0 sequences from 0.28-0.31 to
// 0.26 ms a token (their activations' quantization, norms and mixer no longer on one thread) and
// the tiny AFT-full decode from 0.129 to 0.118; single-sequence decode and prompts of enwik8 the
// same within noise.
constexpr std::size_t kMinWorkPerThread = 1 << 14;

// A split of [0, n): parts ranges of per items (the last one shorter).
struct Ranges {
  std::size_t per;
  std::size_t parts;
};

// [0, n) in at most `parts` ranges (parts >= 1) whose starts are multiples of align.
inline Ranges aligned_ranges(std::size_t n, std::size_t align, std::size_t parts) {
  std::size_t per = (n + parts - 1) / parts;
  per = std::max<std::size_t>(align, (per + align - 1) / align * align);
  return Ranges{per, (n + per - 1) / per};
}

// A range a thread. cost_per_item: work units of one item, used to choose how many threads are
// worth waking.
inline Ranges split_ranges(std::size_t n, std::size_t align, int n_threads,
                           std::size_t cost_per_item) {
  const std::size_t worth = std::max<std::size_t>(1, n * cost_per_item / kMinWorkPerThread);
  return aligned_ranges(n, align,
                        std::min(static_cast<std::size_t>(std::max(n_threads, 1)), worth));
}

// split_ranges' ranges, range p on member p of the caller's team (kernels::parallel_members): an
// op that splits its rows as the op before did reads them on the core that wrote them. On a 2-vCPU
// Zen 5 guest a thread read what the other wrote at 25-32 GB/s against 42-86 its own; there, with
// a prompt's products split by blocks of rows alike (parallel_grid), pp512 at 2 threads ran
// 1.05-1.17x (enwik8-simple f32), 1.07-1.11x (enwik8-local), 1.03-1.06x (AFT-full), 1.18-1.33x
// (q8_0) and 1.03-1.11x (bf16) as fast as with 4 ranges a thread claimed as each finished one
// (docs/benchmarks.md, fifty-third session). What body throws reaches the caller after every range
// ran (the first exception, if several).
template <class Body>
void parallel_ranges(std::size_t n, std::size_t align, int n_threads, std::size_t cost_per_item,
                     const Body& body) {
  const Ranges r = split_ranges(n, align, n_threads, cost_per_item);
  if (r.parts <= 1) {
    body(std::size_t{0}, n);
    return;
  }
  kernels::parallel_members(r.parts,
                            [&](std::size_t p) { body(p * r.per, std::min(n, (p + 1) * r.per)); });
}

// Where a product's rows are too few for a block of them a thread (parallel_grid), its threads
// claim its parts as each finishes one (kernels::parallel_parts), this many a thread: a thread
// slowed by the machine (another process on its core, a slower vCPU of a guest) leaves its later
// parts to the others instead of keeping them waiting at the end of the op. Measured on a 2-vCPU
// Zen 3 guest, enwik8-local f32 pp512 at 2 threads, three rounds alternated: one range a thread
// 1,265-1,394 tokens/s, 4 a thread 1,535-1,610 (2 no better than one; 8 and 16 no better than 4).
constexpr std::size_t kRangesPerThread = 4;

// A product's output, rows (inputs) by columns (weights), cut into blocks of rows by ranges of
// columns: each part reads its rows of the input and its columns of the weights.
struct Grid {
  Ranges rows;
  Ranges cols;
};

// The weights' bytes weigh this many times an input's in product_grid: they stream from memory
// (or the last-level cache), while a part's input rows come again from a nearer cache.
constexpr std::size_t kWeightByteCost = 2;

// The cut of rows x cols into `parts` parts, or as near as the shape allows, that reads least:
// column ranges alone re-read every input row for each range (a bf16 prompt on tiles packs them
// again), blocks of rows re-read the weights for each block. Among the cuts into the most parts
// (up to `parts`), the one of fewest bytes (input row_bytes a row, weights col_bytes a column),
// then of fewest row blocks. The bits of a cell depend on no cut: rows start at multiples of
// row_align and columns at multiples of col_align.
inline Grid product_grid(std::size_t rows, std::size_t row_align, std::size_t row_bytes,
                         std::size_t cols, std::size_t col_align, std::size_t col_bytes,
                         std::size_t parts) {
  auto bytes = [&](const Grid& g) {
    return g.cols.parts * rows * row_bytes + kWeightByteCost * g.rows.parts * cols * col_bytes;
  };
  auto parts_of = [&](const Grid& g) { return std::min(parts, g.rows.parts * g.cols.parts); };
  Grid best{aligned_ranges(rows, row_align, 1), aligned_ranges(cols, col_align, parts)};
  for (std::size_t row_blocks = 2; row_blocks <= parts; ++row_blocks) {
    const Grid grid{aligned_ranges(rows, row_align, row_blocks),
                    aligned_ranges(cols, col_align, (parts + row_blocks - 1) / row_blocks)};
    if (grid.rows.parts != row_blocks) continue;
    if (parts_of(grid) > parts_of(best) ||
        (parts_of(grid) == parts_of(best) && bytes(grid) < bytes(best))) {
      best = grid;
    }
  }
  return best;
}

// A product's output split over as many threads as its cells are worth (cost_per_cell work units
// each): body(r0, r1, c0, c1) for each part. Where every thread gets at least pass_rows rows (those
// a part computes for each read of its weights: no weight is then read more often than by column
// ranges), a block of rows a thread with every column, block p on member p (parallel_ranges):
// each input row is read by one thread, the one that wrote it if the op before split its rows so.
// Otherwise the product_grid cut, kRangesPerThread parts a thread, claimed as each finishes one.
template <class Body>
void parallel_grid(std::size_t rows, std::size_t row_align, std::size_t row_bytes, std::size_t cols,
                   std::size_t col_align, std::size_t col_bytes, std::size_t pass_rows,
                   int n_threads, std::size_t cost_per_cell, const Body& body) {
  const std::size_t cells =
      ((rows + row_align - 1) / row_align) * ((cols + col_align - 1) / col_align);
  const std::size_t worth =
      std::max<std::size_t>(1, rows * cols * cost_per_cell / kMinWorkPerThread);
  const std::size_t threads =
      std::min({static_cast<std::size_t>(std::max(n_threads, 1)), worth, cells});
  if (threads <= 1) {
    body(std::size_t{0}, rows, std::size_t{0}, cols);
    return;
  }
  if (rows >= threads * pass_rows) {
    const Ranges blocks = aligned_ranges(rows, row_align, threads);
    kernels::parallel_members(blocks.parts, [&](std::size_t p) {
      body(p * blocks.per, std::min(rows, (p + 1) * blocks.per), std::size_t{0}, cols);
    });
    return;
  }
  const Grid g = product_grid(rows, row_align, row_bytes, cols, col_align, col_bytes,
                              threads * kRangesPerThread);
  kernels::parallel_parts(g.rows.parts * g.cols.parts, static_cast<int>(threads),
                          [&](std::size_t p) {
                            const std::size_t r = p / g.cols.parts, c = p % g.cols.parts;
                            body(r * g.rows.per, std::min(rows, (r + 1) * g.rows.per),
                                 c * g.cols.per, std::min(cols, (c + 1) * g.cols.per));
                          });
}

// The threads of a run already open (a decoded token's, executor.cpp): this thread is member id of
// size.
using Team = kernels::TeamMember;

// Inside a team: range p of r, a split of [0, n), on member p (none where r has fewer parts).
template <class Body>
void member_range(std::size_t n, const Ranges& r, Team team, const Body& body) {
  const auto part = static_cast<std::size_t>(team.id);
  if (part < r.parts) body(part * r.per, std::min(n, (part + 1) * r.per));
}

// Inside a team: split_ranges' range of this member (a range a member: claiming finer ranges
// there, tried, gained a decoded token nothing, docs/benchmarks.md).
template <class Body>
void team_ranges(std::size_t n, std::size_t align, Team team, std::size_t cost_per_item,
                 const Body& body) {
  member_range(n, split_ranges(n, align, team.size, cost_per_item), team, body);
}

// An op's split written once for both ways it runs (graph.h): CallSplit, a run of the caller's
// team per split (Op::run, parallel_ranges); MemberSplit, this member's range in a region already
// open (Op::run_in_team, team_ranges). sync() orders two splits of one op: every thread's ranges of
// the first are done before any thread starts the second (nothing to do for CallSplit, whose runs
// end together). Every member must reach a MemberSplit's sync: what runs before it must not throw.
struct CallSplit {
  int n_threads;
  template <class Body>
  void ranges(std::size_t n, std::size_t align, std::size_t cost_per_item, const Body& body) const {
    parallel_ranges(n, align, n_threads, cost_per_item, body);
  }
  template <class Body>
  void grid(std::size_t rows, std::size_t row_align, std::size_t row_bytes, std::size_t cols,
            std::size_t col_align, std::size_t col_bytes, std::size_t pass_rows,
            std::size_t cost_per_cell, const Body& body) const {
    parallel_grid(rows, row_align, row_bytes, cols, col_align, col_bytes, pass_rows, n_threads,
                  cost_per_cell, body);
  }
  void sync() const {}
};

struct MemberSplit {
  Team team;
  template <class Body>
  void ranges(std::size_t n, std::size_t align, std::size_t cost_per_item, const Body& body) const {
    team_ranges(n, align, team, cost_per_item, body);
  }
  // A batch's few rows: ranges of columns alone, over every member however small the product
  // (kMinWorkPerThread aside): the members are awake and the barrier after a product is there
  // anyway, and each member reads the same columns of the weights at every token, which stay in
  // its own cache. The tiny models (6 x 128, 3.2 MB of weights) decoded at 2 threads of an Emerald
  // Rapids 1.12-1.78x faster than with their small products on one member (docs/benchmarks.md).
  template <class Body>
  void grid(std::size_t rows, std::size_t, std::size_t, std::size_t cols, std::size_t col_align,
            std::size_t, std::size_t, std::size_t, const Body& body) const {
    member_range(cols, aligned_ranges(cols, col_align, static_cast<std::size_t>(team.size)), team,
                 [&](std::size_t c0, std::size_t c1) { body(std::size_t{0}, rows, c0, c1); });
  }
  void sync() const { kernels::ThreadTeam::barrier_of_run(team); }
};

}  // namespace aft
