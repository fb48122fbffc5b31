#include "compute_threads.h"

#include <algorithm>
#include <atomic>

#include "cpu_load.h"
#include "kernels/thread_team.h"
#include "physical_cores.h"

namespace aft {
namespace {

std::atomic<int> calls_computing{0};
// The previous call's reading: a CPU counts as busy elsewhere only if two readings in a row say
// so, not for a moment's blip (a shell command, a kernel thread).
std::atomic<int> last_busy_elsewhere{0};

}  // namespace

int automatic_threads(int cores, int cpus, int sharing, std::optional<int> busy_elsewhere) {
  int count = std::max(1, cores / std::max(1, sharing));
  if (busy_elsewhere) count = std::min(count, std::max(1, cpus - *busy_elsewhere));
  return count;
}

ComputeThreads::ComputeThreads(int requested) {
  const int sharing = calls_computing.fetch_add(1) + 1;
  if (requested > 0) {
    count_ = requested;
    return;
  }
  // This process's running threads: its computing calls and its team workers, less those asleep.
  const int own = sharing + kernels::ThreadTeam::workers_in_process() -
                  kernels::ThreadTeam::threads_asleep_in_process();
  const AllowedCpus allowed = allowed_cpus();
  std::optional<int> busy = cpus_busy_elsewhere(std::max(1, own), allowed.count);
  if (busy) {
    const int now = *busy;
    busy = std::min(now, last_busy_elsewhere.exchange(now));
  }
  count_ = automatic_threads(physical_cores(allowed.set), allowed.count, sharing, busy);
}

ComputeThreads::~ComputeThreads() { calls_computing.fetch_sub(1); }

}  // namespace aft
