// The threads a call computes with: the calling thread and workers of its own, kept between calls.
// A waiting thread spins for a few microseconds, then yields its core between checks, then sleeps
// in the kernel (a futex). OpenMP's default spins without yielding: beside another busy process
// on the same cores, its waiting threads burnt the time slices that the threads they waited for
// needed, and two aft processes on two cores ran prefill at 3% of their speed alone
// (docs/architecture.md, "Threads and determinism").
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/first_exception.h"

namespace aft::kernels {

// A thread's place in a run: member id of size.
struct TeamMember {
  int id;
  int size;

  // This member's share of parts [0, parts): a contiguous range, [begin, end).
  std::size_t share_begin(std::size_t parts) const { return std::min(parts, index() * per(parts)); }
  std::size_t share_end(std::size_t parts) const {
    return std::min(parts, (index() + 1) * per(parts));
  }

 private:
  std::size_t index() const { return static_cast<std::size_t>(id); }
  std::size_t per(std::size_t parts) const {
    const auto members = static_cast<std::size_t>(size);
    return (parts + members - 1) / members;
  }
};

// A word that threads wait on for a change: spin, yield, then sleep until it is published.
class alignas(64) WaitWord {
 public:
  uint32_t load() const { return value_.load(std::memory_order_acquire); }
  // Returns the new value once it differs from old.
  uint32_t wait_change(uint32_t old);
  void publish(uint32_t value);
  // How many waits here outlasted the spin (and yielded the core, or slept), and whether a thread
  // sleeps here now: the team's behaviour, for tests.
  uint64_t long_waits() const { return long_waits_.load(std::memory_order_relaxed); }
  bool has_sleepers() const { return sleepers_.load(std::memory_order_relaxed) > 0; }

 private:
  std::atomic<uint32_t> value_{0};
  std::atomic<uint32_t> sleepers_{0};
  std::atomic<uint64_t> long_waits_{0};
};

class ThreadTeam {
 public:
  // The calling thread's team: its workers start on first use and end with the thread.
  static ThreadTeam& of_this_thread();

  // Runs body(TeamMember) on `size` threads, this one as member 0, and returns when every member
  // has returned. Within a run (a nested call) body runs on this thread alone, as member 0 of 1.
  // body must not throw: FirstException carries errors out (parallel_parts does).
  template <class Body>
  void run(int size, const Body& body) {
    run_job(
        size, [](const void* b, TeamMember m) { (*static_cast<const Body*>(b))(m); }, &body);
  }

  // Within run(): returns when every member of the run has reached it.
  void barrier(TeamMember member);
  // The same for the run this thread is a member of (on any member's thread; outside runs, at
  // once).
  static void barrier_of_run(TeamMember member);

  // This thread's member id in the outermost run it is part of; 0 outside runs.
  static int this_member();

  // The workers of every team in the process, and the team threads (callers included) asleep in a
  // wait now: how many of the process's threads keep a CPU busy (compute_threads.cpp).
  static int workers_in_process();
  static int threads_asleep_in_process();

  // How many waits of this team's threads outlasted the spin so far, and how many of its workers
  // wait for a run asleep now (measures, not contracts).
  uint64_t long_waits() const;
  int sleeping_workers() const;

  ThreadTeam() = default;
  ~ThreadTeam();
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;

 private:
  using Job = void (*)(const void* body, TeamMember member);
  struct Worker;

  void run_job(int size, Job job, const void* body);
  void add_workers(std::size_t count);
  void forget_forked_workers();
  void work(Worker& self, int id);

  std::vector<std::unique_ptr<Worker>> workers_;
  // The current run, written before its members are woken (WaitWord::publish orders it).
  Job job_ = nullptr;
  const void* body_ = nullptr;
  int size_ = 1;
  uint32_t generation_ = 0;
  bool stopping_ = false;
  unsigned forks_ = 0;  // the process's fork count (in children) its workers were started at
  // The barrier: how many members arrived, and its phase, advanced by the last to arrive.
  alignas(64) std::atomic<int> arrived_{0};
  WaitWord phase_;
};

// Runs body(part) for every part in [0, parts) on up to `threads` threads of this thread's team,
// each thread claiming the next part as it finishes one (a nested call: this thread, in order).
// What body throws reaches the caller after every part ran (the first exception, if several).
template <class Body>
void parallel_parts(std::size_t parts, int threads, const Body& body) {
  const std::size_t size =
      std::min<std::size_t>(parts, static_cast<std::size_t>(std::max(threads, 1)));
  if (size <= 1) {
    for (std::size_t p = 0; p < parts; ++p) body(p);
    return;
  }
  FirstException error;
  std::atomic<std::size_t> next{0};
  ThreadTeam::of_this_thread().run(static_cast<int>(size), [&](TeamMember) {
    error.run([&] {
      for (std::size_t p = next.fetch_add(1, std::memory_order_relaxed); p < parts;
           p = next.fetch_add(1, std::memory_order_relaxed)) {
        body(p);
      }
    });
  });
  error.rethrow();
}

// Runs body(part) for every part in [0, parts) on `parts` threads of this thread's team, part p on
// member p: a split made alike from call to call puts a part on the same thread each time, so what
// one call wrote there the next finds in that core's cache (a nested call: this thread, in order).
// What body throws reaches the caller after every part ran (the first exception, if several).
template <class Body>
void parallel_members(std::size_t parts, const Body& body) {
  FirstException error;
  const auto each = [&](TeamMember member) {
    for (auto p = static_cast<std::size_t>(member.id); p < parts;
         p += static_cast<std::size_t>(member.size)) {
      error.run([&] { body(p); });
    }
  };
  if (parts <= 1) {
    each(TeamMember{0, 1});
  } else {
    ThreadTeam::of_this_thread().run(static_cast<int>(parts), each);
  }
  error.rethrow();
}

}  // namespace aft::kernels
