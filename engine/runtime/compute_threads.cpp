#include "compute_threads.h"

#include <algorithm>
#include <atomic>

#include "physical_cores.h"

namespace aft {
namespace {
std::atomic<int> calls_computing{0};
}  // namespace

ComputeThreads::ComputeThreads(int requested) {
  const int sharing = calls_computing.fetch_add(1) + 1;
  count_ = requested > 0 ? requested : std::max(1, physical_cores() / sharing);
}

ComputeThreads::~ComputeThreads() { calls_computing.fetch_sub(1); }

}  // namespace aft
