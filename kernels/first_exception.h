// The first exception thrown by the threads of a team's run (thread_team.h). An exception must
// not leave a worker thread (std::terminate), so each thread's body catches into this, and the
// thread that started the run rethrows after it: a failure (out of memory included) reaches the
// caller as an exception of its own type instead of ending the process.
#pragma once

#include <exception>
#include <mutex>

namespace aft::kernels {

class FirstException {
 public:
  // Runs body, keeping what it throws if it is the first.
  template <class Body>
  void run(const Body& body) noexcept {
    try {
      body();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }
  void rethrow() const {
    if (error_) std::rethrow_exception(error_);
  }
  // After the threads that ran bodies have finished.
  bool failed() const { return error_ != nullptr; }

 private:
  std::mutex mutex_;
  std::exception_ptr error_;
};

}  // namespace aft::kernels
