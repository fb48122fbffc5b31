#include "compute_threads.h"

#include <omp.h>

#include <algorithm>
#include <atomic>

#include "physical_cores.h"

namespace aft {
namespace {
std::atomic<int> calls_computing{0};
}  // namespace

ComputeThreads::ComputeThreads(int requested) : saved_max_threads_(omp_get_max_threads()) {
  const int sharing = calls_computing.fetch_add(1) + 1;
  count_ = requested > 0 ? requested : std::max(1, physical_cores() / sharing);
  omp_set_num_threads(count_);
}

ComputeThreads::~ComputeThreads() {
  omp_set_num_threads(saved_max_threads_);
  calls_computing.fetch_sub(1);
}

}  // namespace aft
