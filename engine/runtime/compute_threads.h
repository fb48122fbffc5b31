// The threads one call of a session computes with (aft.h, aft_session_params.n_threads), for as
// long as the call runs.
#pragma once

namespace aft {

class ComputeThreads {
 public:
  // requested > 0: that many. 0: the physical cores shared by the calls computing at this moment
  // (this one included), so that sessions on several threads never oversubscribe the cores.
  explicit ComputeThreads(int requested);
  ~ComputeThreads();
  ComputeThreads(const ComputeThreads&) = delete;
  ComputeThreads& operator=(const ComputeThreads&) = delete;

  int count() const { return count_; }

 private:
  int count_;
};

}  // namespace aft
