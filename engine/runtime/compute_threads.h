// The threads one call of a session computes with (aft.h, aft_session_params.n_threads), for as
// long as the call runs.
#pragma once

#include <optional>

namespace aft {

class ComputeThreads {
 public:
  // requested > 0: that many. 0: automatic_threads() of this moment: the physical cores shared by
  // the calls computing now (this one included), so that sessions on several threads never
  // oversubscribe the cores, and no more than the CPUs other processes leave free.
  explicit ComputeThreads(int requested);
  ~ComputeThreads();
  ComputeThreads(const ComputeThreads&) = delete;
  ComputeThreads& operator=(const ComputeThreads&) = delete;

  int count() const { return count_; }

 private:
  int count_;
};

// The automatic count: cores / sharing (at least 1), the `sharing` calls of this process computing
// at once; where busy_elsewhere (CPUs that other processes keep busy, cpu_load.h) is known, no
// more than the cpus this process may use less those (at least 1).
int automatic_threads(int cores, int cpus, int sharing, std::optional<int> busy_elsewhere);

}  // namespace aft
