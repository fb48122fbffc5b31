// Splits [0, n) into contiguous ranges over OpenMP threads. Range starts are multiples of `align`,
// so a kernel sees the same lane and tail layout for every item whatever the thread count: results
// do not depend on the number of threads.
#pragma once

#include <algorithm>
#include <cstddef>

namespace aft {

// Work below this many units (about one multiply-add each) per thread costs less than waking a
// thread: small ops run on fewer threads.
constexpr std::size_t kMinWorkPerThread = 1 << 15;

// cost_per_item: work units of one item, used to choose how many threads are worth waking.
template <class Body>
void parallel_ranges(std::size_t n, std::size_t align, int n_threads, std::size_t cost_per_item,
                     const Body& body) {
  const std::size_t worth = std::max<std::size_t>(1, n * cost_per_item / kMinWorkPerThread);
  const std::size_t threads = std::min(static_cast<std::size_t>(std::max(n_threads, 1)), worth);
  std::size_t per = (n + threads - 1) / threads;
  per = std::max<std::size_t>(align, (per + align - 1) / align * align);
  const std::size_t parts = (n + per - 1) / per;
  if (parts <= 1) {
    body(std::size_t{0}, n);
    return;
  }
#pragma omp parallel for num_threads(static_cast <int>(parts)) schedule(static)
  for (std::size_t p = 0; p < parts; ++p) {
    body(p * per, std::min(n, (p + 1) * per));
  }
}

}  // namespace aft
