// Software prefetch of the weights a GEMV reads next, spread over the steps of the work before
// them: the hardware prefetchers follow a stream only a few lines ahead, and a decode that does
// much work per byte (a batch of vectors, q8_0's integer products) otherwise waits for memory at
// the start of every block of rows. A template on the architecture, like every function of the
// ISA files (README.md).
#pragma once

#include <algorithm>
#include <cstddef>

namespace aft::kernels::simd {

// Where the prefetched lines go. To L2 only, they take no L1 fill buffer from the loads of the
// work at hand and evict none of its lines (a batch's f32 vectors alone may fill L1). kL2 is
// prefetcht1: Intel's cores fill L2 with it, and AMD's from Zen 4 (AMD documents it as new there);
// AMD's earlier cores fill L1 as for kL1 (docs/benchmarks.md: what that costs a Zen 3).
enum class PrefetchTo { kL1, kL2 };

template <class A, PrefetchTo kTo = PrefetchTo::kL1>
struct Prefetch {
  static constexpr std::size_t kLine = 64;
  static constexpr int kLocality = kTo == PrefetchTo::kL1 ? 3 : 2;  // __builtin_prefetch's
  const char* next = nullptr;
  std::size_t lines = 0;
  std::size_t per_step = 0;

  Prefetch() = default;
  // The lines of [begin, begin + bytes), about evenly over `steps` calls of step().
  Prefetch(const void* begin, std::size_t bytes, std::size_t steps)
      : next(static_cast<const char*>(begin)),
        lines((bytes + kLine - 1) / kLine),
        per_step(steps ? (lines + steps - 1) / steps : lines) {}

  // Part `part` of `parts` about equal parts of [begin, begin + bytes) (begin may be null when
  // bytes is 0), over `steps` calls of step(): work split in parts, each asking for its share.
  static Prefetch part_of(const void* begin, std::size_t bytes, std::size_t part, std::size_t parts,
                          std::size_t steps) {
    const std::size_t share = (bytes + parts - 1) / parts;
    const std::size_t done = std::min(bytes, part * share);
    return Prefetch(begin ? static_cast<const char*>(begin) + done : nullptr,
                    std::min(share, bytes - done), steps);
  }

  void step() {
    const std::size_t n = std::min(per_step, lines);
    if (n == 0) return;  // next may be null
    for (std::size_t i = 0; i < n; ++i) __builtin_prefetch(next + i * kLine, 0, kLocality);
    next += n * kLine;
    lines -= n;
  }

  // Line `i` of the range (i < lines), for a caller that asks for one line a step and counts
  // the steps itself, leaving its other steps without step()'s loop and checks (the group GEMV on
  // AVX2: a step of 12 multiply-adds 37 instructions and 5 branches through step(), 26 and 1
  // while asking this way, 24 after).
  [[gnu::always_inline]] void line(std::size_t i) const {
    __builtin_prefetch(next + i * kLine, 0, kLocality);
  }
};

}  // namespace aft::kernels::simd
