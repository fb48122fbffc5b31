// The thread team (kernels/thread_team.h): every member runs once with its own id, the barrier
// orders what members wrote before it, nested runs stay on their thread, a free thread claims the
// parts a busy one has not, errors reach the caller, and waiting threads give their core away
// instead of spinning.
#include "kernels/thread_team.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <vector>

namespace aft::kernels {
namespace {

TEST(ThreadTeam, EveryMemberRunsOnceWithItsId) {
  ThreadTeam& team = ThreadTeam::of_this_thread();
  // Sizes up and down: workers beyond a run's size stay out of it.
  for (int size : {1, 2, 5, 3, 8, 2, 1, 4}) {
    std::vector<std::atomic<int>> runs(static_cast<std::size_t>(size));
    std::vector<std::thread::id> threads(static_cast<std::size_t>(size));
    team.run(size, [&](TeamMember member) {
      ASSERT_EQ(member.size, size);
      runs[static_cast<std::size_t>(member.id)].fetch_add(1);
      threads[static_cast<std::size_t>(member.id)] = std::this_thread::get_id();
      EXPECT_EQ(ThreadTeam::this_member(), member.id);
    });
    for (int id = 0; id < size; ++id) {
      EXPECT_EQ(runs[static_cast<std::size_t>(id)].load(), 1)
          << "size " << size << " member " << id;
      for (int other = 0; other < id; ++other) EXPECT_NE(threads[id], threads[other]);
    }
    EXPECT_EQ(threads[0], std::this_thread::get_id());  // member 0 is the caller
    EXPECT_EQ(ThreadTeam::this_member(), 0);
  }
}

TEST(ThreadTeam, BarrierOrdersEachPhaseAtEverySize) {
  // Sizes up and down, powers of two and not, each run after a run of another size.
  ThreadTeam& team = ThreadTeam::of_this_thread();
  for (int size : {4, 2, 3, 5, 8, 7, 2, 6, 3}) {
    constexpr int kPhases = 500;
    std::vector<int> written(static_cast<std::size_t>(size), -1);
    std::atomic<int> wrong{0};
    team.run(size, [&](TeamMember member) {
      for (int phase = 0; phase < kPhases; ++phase) {
        written[static_cast<std::size_t>(member.id)] = phase;
        team.barrier(member);
        for (int other = 0; other < size; ++other) {
          if (written[static_cast<std::size_t>(other)] != phase) wrong.fetch_add(1);
        }
        team.barrier(member);
      }
    });
    EXPECT_EQ(wrong.load(), 0) << "size " << size;
  }
}

TEST(ThreadTeam, NestedRunStaysOnItsThread) {
  std::vector<int> nested_members(3, -1);
  ThreadTeam::of_this_thread().run(3, [&](TeamMember outer) {
    ThreadTeam::of_this_thread().run(4, [&](TeamMember inner) {
      EXPECT_EQ(inner.id, 0);
      EXPECT_EQ(inner.size, 1);
      nested_members[static_cast<std::size_t>(outer.id)] = ThreadTeam::this_member();
    });
  });
  EXPECT_EQ(nested_members, (std::vector<int>{0, 1, 2}));
}

TEST(ThreadTeam, ParallelPartsCoversEveryPartOnceAtAnyThreadCount) {
  for (int threads : {1, 2, 3, 7}) {
    for (std::size_t parts : {0, 1, 2, 5, 64, 1001}) {
      std::vector<std::atomic<int>> seen(parts);
      parallel_parts(parts, threads, [&](std::size_t p) { seen[p].fetch_add(1); });
      for (std::size_t p = 0; p < parts; ++p) ASSERT_EQ(seen[p].load(), 1) << parts << " " << p;
    }
  }
}

TEST(ThreadTeam, ParallelMembersRunsPartPOnMemberP) {
  for (std::size_t parts : {0, 1, 2, 3, 7}) {
    std::vector<std::atomic<int>> seen(parts);
    parallel_members(parts, [&](std::size_t p) {
      EXPECT_EQ(static_cast<std::size_t>(ThreadTeam::this_member()), parts > 1 ? p : 0);
      seen[p].fetch_add(1);
    });
    for (std::size_t p = 0; p < parts; ++p) ASSERT_EQ(seen[p].load(), 1) << parts << " " << p;
  }
  // Nested in a run: every part on this thread, in order.
  ThreadTeam::of_this_thread().run(2, [](TeamMember) {
    std::vector<std::size_t> order;
    parallel_members(3, [&](std::size_t p) { order.push_back(p); });
    EXPECT_EQ(order, (std::vector<std::size_t>{0, 1, 2}));
  });
  // A part that throws: the others still run, the first error reaches the caller.
  std::atomic<int> ran{0};
  EXPECT_THROW(parallel_members(3,
                                [&](std::size_t p) {
                                  ran.fetch_add(1);
                                  if (p == 1) throw std::runtime_error("part 1");
                                }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 3);
}

TEST(ThreadTeam, AFreeThreadRunsThePartsASlowOneHasNotClaimed) {
  // The first part claimed waits until every other part has run: only the other thread can run
  // them (the deadline keeps a regression from hanging the suite).
  std::atomic<int> others{0};
  std::atomic<bool> first{true};
  parallel_parts(8, 2, [&](std::size_t) {
    if (first.exchange(false)) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (others.load() < 7 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
      }
      EXPECT_EQ(others.load(), 7);
    } else {
      others.fetch_add(1);
    }
  });
  EXPECT_EQ(others.load(), 7);
}

TEST(ThreadTeam, FirstErrorReachesTheCallerAfterEveryPartRan) {
  std::atomic<int> ran{0};
  EXPECT_THROW(parallel_parts(16, 4,
                              [&](std::size_t p) {
                                ran.fetch_add(1);
                                if (p == 5) throw std::runtime_error("part 5");
                              }),
               std::runtime_error);
  // The member whose part failed claims no more; the others run every part left.
  EXPECT_EQ(ran.load(), 16);
  // The team is usable after a failed run.
  std::atomic<int> after{0};
  parallel_parts(8, 4, [&](std::size_t) { after.fetch_add(1); });
  EXPECT_EQ(after.load(), 8);
}

TEST(ThreadTeam, IdleWorkersSleep) {
  ThreadTeam& team = ThreadTeam::of_this_thread();
  team.run(3, [](TeamMember) {});
  // The workers wait for the next run: after their short spin they sleep. Polled, not timed: a
  // loaded machine may take long to schedule them, but they must get there.
  // (Workers of earlier tests' larger runs sleep too.)
  for (int i = 0; i < 10000 && team.sleeping_workers() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GE(team.sleeping_workers(), 2);
  // A sleeping worker wakes for the next run.
  std::atomic<int> members{0};
  team.run(3, [&](TeamMember) { members.fetch_add(1); });
  EXPECT_EQ(members.load(), 3);
}

TEST(ThreadTeam, TeamsOfTwoThreadsOnOneCoreBothFinish) {
  // Two callers, each a team of 3 with a barrier per step, all on one CPU: a waiting thread must
  // give the core to the thread it waits for (a pure spin would stall for whole time slices). The
  // test asserts progress and that waits went past the spin, not time.
  cpu_set_t one;
  CPU_ZERO(&one);
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &allowed)) ++cpu;
  CPU_SET(cpu, &one);
  constexpr int kSteps = 300;
  std::vector<uint64_t> long_waits(2, 0);
  std::vector<int> steps(2, 0);
  auto caller = [&](int c) {
    // Set before the team's first run: its workers inherit the caller's affinity.
    ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    ThreadTeam& team = ThreadTeam::of_this_thread();
    team.run(3, [&](TeamMember member) {
      for (int step = 0; step < kSteps; ++step) {
        if (member.id == 0) ++steps[static_cast<std::size_t>(c)];
        team.barrier(member);
      }
    });
    long_waits[static_cast<std::size_t>(c)] = team.long_waits();
  };
  std::thread a(caller, 0);
  std::thread b(caller, 1);
  a.join();
  b.join();
  EXPECT_EQ(steps, (std::vector<int>{kSteps, kSteps}));
  EXPECT_GT(long_waits[0], 0u);
  EXPECT_GT(long_waits[1], 0u);
}

#if defined(__SANITIZE_THREAD__)
#define AFT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define AFT_TSAN 1
#endif
#endif

TEST(ThreadTeam, AForkedChildRunsWithWorkersOfItsOwn) {
#ifdef AFT_TSAN
  GTEST_SKIP()
      << "skipped: ThreadSanitizer ends a multi-threaded process's child that starts threads";
#else
  ThreadTeam& team = ThreadTeam::of_this_thread();
  team.run(3, [](TeamMember) {});  // the parent's workers exist
  const pid_t child = fork();
  ASSERT_NE(child, -1);
  if (child == 0) {
    alarm(20);  // a hang fails the test instead of stalling the suite
    std::atomic<int> members{0};
    ThreadTeam::of_this_thread().run(3, [&](TeamMember) { members.fetch_add(1); });
    // Exits through exit(), whose thread_local destructors stop the child's own workers.
    std::exit(members.load() == 3 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child hung or crashed (status " << status << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0);
#endif
}

}  // namespace
}  // namespace aft::kernels
