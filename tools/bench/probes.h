// The machine's limits, measured by aft-bench in the same run as the model (other load on the
// machine moves them a lot): read bandwidth, the FMA peak, and what a parallel region costs.
#pragma once

#include <cstddef>

#include "kernels/huge_page_buffer.h"

namespace aft::bench {

// Streaming sums over a buffer split into contiguous ranges, one per OpenMP thread (as the engine
// splits a weight matrix's rows). A buffer much larger than the last-level cache measures memory
// bandwidth; one of the size of a model's weights, read again and again, measures what decoding
// can reach wherever those weights stay cached (the limit for models that fit in a cache).
class ReadProbe {
 public:
  explicit ReadProbe(std::size_t bytes);  // allocates and writes the buffer (maps its pages)
  std::size_t bytes() const { return buffer_.size(); }
  // GB/s (1e9 bytes) of the fastest of `runs` timed passes with `threads` threads, after one
  // untimed pass. Passes alternate between one stream per thread and four interleaved ones (a
  // matrix-vector product reads several rows at once); each covers at least 64 MiB.
  double best_gbps(int threads, int runs) const;

 private:
  float pass(int threads, std::size_t streams) const;  // reads the buffer `repeats_` times
  kernels::HugePageBuffer buffer_;                     // floats, on the pages packed weights get
  std::size_t repeats_ = 1;
};

// Register-resident FMA chains on every thread (kernels.h, fma_probe_f32).
class FmaProbe {
 public:
  FmaProbe();  // picks an iteration count that takes ~0.1 s on one thread
  // GFLOP/s of the fastest of `runs` runs with `threads` OpenMP threads.
  double best_gflops(int threads, int runs) const;

 private:
  std::size_t iterations_ = 0;
};

// The cost of opening and closing an OpenMP parallel region on `threads` threads: what each op
// pays to split its work, which decides whether small models gain from a second thread.
class ForkJoinProbe {
 public:
  // Microseconds per region, the fastest of `runs` runs of many empty regions.
  static double best_microseconds(int threads, int runs);
};

}  // namespace aft::bench
