#include "kernels/thread_team.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace aft::kernels {
namespace {

// A waiting thread first spins on the CPU for this many checks (a few microseconds: most of a
// decoded token's barriers are reached within them), then yields its core between checks
// (sched_yield: another process's thread ready on this core runs, else it returns at once), and
// after kYieldFor sleeps until woken. Measured on 2 cores (docs/benchmarks.md, "Sharing the
// cores"): without the yields two processes decoded at a third of their speed alone whatever the
// spin, with them at half; under ~300 us of yielding the next token's call found the workers
// asleep (decode 20% slower alone); from 300 us to 2 ms both stayed the same.
constexpr unsigned kPauseChecks = 256;
constexpr std::chrono::microseconds kYieldFor{1000};

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// The futex calls on an atomic's word (std::atomic<uint32_t> is a plain 32-bit word on Linux).
uint32_t* word_of(std::atomic<uint32_t>& value) { return reinterpret_cast<uint32_t*>(&value); }

void futex_wait(std::atomic<uint32_t>& value, uint32_t expected) {
  syscall(SYS_futex, word_of(value), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>& value) {
  syscall(SYS_futex, word_of(value), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

std::atomic<int> g_workers{0};
std::atomic<int> g_asleep{0};
// Advanced in a forked child: the parent's workers do not exist there.
std::atomic<unsigned> g_forks{0};

void after_fork_in_child() {
  g_forks.fetch_add(1, std::memory_order_relaxed);
  g_workers.store(0, std::memory_order_relaxed);
  g_asleep.store(0, std::memory_order_relaxed);
}

// The run this thread is a member of (nullptr outside runs), and its member id.
thread_local ThreadTeam* t_team = nullptr;
thread_local int t_member = 0;

// Marks this thread as member id of team for a run, restoring what it was after.
class Membership {
 public:
  Membership(ThreadTeam* team, int id) : team_(t_team), member_(t_member) {
    t_team = team;
    t_member = id;
  }
  ~Membership() {
    t_team = team_;
    t_member = member_;
  }
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

 private:
  ThreadTeam* team_;
  int member_;
};

}  // namespace

uint32_t WaitWord::wait_change(uint32_t old) {
  for (unsigned i = 0; i < kPauseChecks; ++i) {
    const uint32_t now = load();
    if (now != old) return now;
    cpu_relax();
  }
  long_waits_.fetch_add(1, std::memory_order_relaxed);
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + kYieldFor;
  for (unsigned i = 1;; ++i) {
    const uint32_t now = load();
    if (now != old) return now;
    sched_yield();
    if (i % 16 == 0 && Clock::now() > deadline) break;
  }
  while (true) {
    // Counted before the value is read again: publish() either is seen here or sees a sleeper.
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    if (value_.load(std::memory_order_seq_cst) == old) {
      g_asleep.fetch_add(1, std::memory_order_relaxed);
      futex_wait(value_, old);
      g_asleep.fetch_sub(1, std::memory_order_relaxed);
    }
    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
    const uint32_t now = load();
    if (now != old) return now;
  }
}

void WaitWord::publish(uint32_t value) {
  value_.store(value, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) futex_wake_all(value_);
}

struct ThreadTeam::Worker {
  WaitWord go;  // the generation of the run it is to join
  std::thread thread;
};

ThreadTeam& ThreadTeam::of_this_thread() {
  thread_local ThreadTeam team;
  return team;
}

int ThreadTeam::this_member() { return t_member; }

int ThreadTeam::workers_in_process() { return g_workers.load(std::memory_order_relaxed); }

int ThreadTeam::threads_asleep_in_process() { return g_asleep.load(std::memory_order_relaxed); }

uint64_t ThreadTeam::long_waits() const {
  uint64_t total = phase_.long_waits();
  for (const auto& worker : workers_) total += worker->go.long_waits();
  return total;
}

int ThreadTeam::sleeping_workers() const {
  int sleeping = 0;
  for (const auto& worker : workers_) sleeping += worker->go.has_sleepers() ? 1 : 0;
  return sleeping;
}

void ThreadTeam::forget_forked_workers() {
  if (forks_ == g_forks.load(std::memory_order_relaxed)) return;
  // A forked child (this thread the one that forked): the workers are the parent's and do not run
  // here. Their handles are let go (detached: nothing to wait for), and the team starts afresh.
  for (auto& worker : workers_) worker->thread.detach();
  workers_.clear();
  arrived_.store(0, std::memory_order_relaxed);
  forks_ = g_forks.load(std::memory_order_relaxed);
}

ThreadTeam::~ThreadTeam() {
  forget_forked_workers();
  stopping_ = true;
  ++generation_;
  for (auto& worker : workers_) worker->go.publish(generation_);
  for (auto& worker : workers_) worker->thread.join();
}

void ThreadTeam::add_workers(std::size_t count) {
  static const bool registered = pthread_atfork(nullptr, nullptr, after_fork_in_child) == 0;
  (void)registered;
  forget_forked_workers();
  while (workers_.size() < count) {
    workers_.push_back(std::make_unique<Worker>());
    Worker& worker = *workers_.back();
    try {
      const int id = static_cast<int>(workers_.size());  // member 0 is the caller
      worker.thread = std::thread([this, &worker, id] { work(worker, id); });
    } catch (...) {
      workers_.pop_back();
      throw;
    }
  }
}

void ThreadTeam::work(Worker& self, int id) {
  g_workers.fetch_add(1, std::memory_order_relaxed);
  uint32_t seen = 0;
  while (true) {
    seen = self.go.wait_change(seen);
    if (stopping_) {
      g_workers.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
    const TeamMember member{id, size_};
    {
      const Membership membership(this, member.id);
      job_(body_, member);
    }
    barrier(member);
  }
}

void ThreadTeam::run_job(int size, Job job, const void* body) {
  if (size <= 1 || t_team != nullptr) {
    // Nested in a run: this thread alone, keeping its member id (its working memory's slot).
    job(body, TeamMember{0, 1});
    return;
  }
  add_workers(static_cast<std::size_t>(size - 1));
  job_ = job;
  body_ = body;
  size_ = size;
  ++generation_;
  for (int i = 0; i < size - 1; ++i) workers_[static_cast<std::size_t>(i)]->go.publish(generation_);
  {
    const Membership membership(this, 0);
    job(body, TeamMember{0, size});
  }
  barrier(TeamMember{0, size});
}

void ThreadTeam::barrier_of_run(TeamMember member) {
  if (t_team) t_team->barrier(member);
}

void ThreadTeam::barrier(TeamMember member) {
  if (member.size <= 1) return;
  const uint32_t phase = phase_.load();
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == member.size) {
    arrived_.store(0, std::memory_order_relaxed);
    phase_.publish(phase + 1);
  } else {
    phase_.wait_change(phase);
  }
}

}  // namespace aft::kernels
