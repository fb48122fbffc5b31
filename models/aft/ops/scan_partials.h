// The partial sums of a prefill scan (aft_mixer_op.cpp, decay_mixer_op.cpp): the chunk is cut into
// segments, and unit u = segment * blocks + block keeps the (m, a, b) of one segment's positions in
// one channel block. Held in the scratch of the thread that starts the scan and shared, through
// this view, by the threads of its parallel regions; the last segment's units end with the
// session's new sums.
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>

#include "engine/format/aligned_buffer.h"
#include "kernels/matmul.h"
#include "models/aft/channel_blocked_rows.h"

namespace aft {

// The prefill of narrow models (d under 512, whose matrix products split rows into blocks of
// kMatmulBlockRows, kernels/matmul.h) runs as a scan over segments of this many positions: a matmul
// row block, so that a thread tends to read the rows it has just computed, and the threads have
// work even with fewer channel blocks than threads.
constexpr std::size_t kSegmentRows = kernels::kMatmulBlockRows;
constexpr std::size_t kSegmentedBelowWidth =
    kernels::kNarrowBelowColumnBlocks * kernels::kMatmulBlockColumns;

// The scratch object the units' sums live in (one per calling thread, kept from call to call).
struct ScanPartialSums {
  AlignedDoubles sums;
};

class ScanPartials {
 public:
  static constexpr std::size_t kBlock = ChannelBlockedRows::kBlock;

  ScanPartials(ScanPartialSums& storage, std::size_t units) {
    storage.sums.resize(units * 3 * kBlock);
    data_ = storage.sums.data();
  }

  double* m(std::size_t unit) const { return data_ + unit * 3 * kBlock; }
  double* a(std::size_t unit) const { return m(unit) + kBlock; }
  double* b(std::size_t unit) const { return m(unit) + 2 * kBlock; }

  // The empty state over n channels.
  void clear(std::size_t unit, std::size_t n) const {
    std::fill(m(unit), m(unit) + n, -std::numeric_limits<double>::infinity());
    std::fill(a(unit), a(unit) + n, 0.0);
    std::fill(b(unit), b(unit) + n, 0.0);
  }
  void store(std::size_t unit, std::size_t n, const double* from_m, const double* from_a,
             const double* from_b) const {
    std::copy(from_m, from_m + n, m(unit));
    std::copy(from_a, from_a + n, a(unit));
    std::copy(from_b, from_b + n, b(unit));
  }
  void load(std::size_t unit, std::size_t n, double* to_m, double* to_a, double* to_b) const {
    std::copy(m(unit), m(unit) + n, to_m);
    std::copy(a(unit), a(unit) + n, to_a);
    std::copy(b(unit), b(unit) + n, to_b);
  }

 private:
  double* data_;
};

}  // namespace aft
