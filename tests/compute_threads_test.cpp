// The automatic thread count (engine/runtime/compute_threads.h, cpu_load.h): the cores shared by
// the process's computing calls, and no more than the CPUs other work leaves free.
#include "engine/runtime/compute_threads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "engine/runtime/cpu_load.h"

namespace aft {
namespace {

TEST(CpuLoad, ReadsTheRunnableThreadsOfLoadavg) {
  EXPECT_EQ(runnable_threads("0.50 0.40 0.30 3/250 1234\n"), 3);
  EXPECT_EQ(runnable_threads("12.00 8.10 4.20 17/1021 99"), 17);
  EXPECT_EQ(runnable_threads(""), std::nullopt);
  EXPECT_EQ(runnable_threads("0.50 0.40 0.30 3-250 1234"), std::nullopt);
  EXPECT_EQ(runnable_threads("0.50 0.40 0.30 300/250 1234"), std::nullopt);
  EXPECT_EQ(runnable_threads("0.50 0.40 0.30 -1/250 1234"), std::nullopt);
}

TEST(ComputeThreads, AutomaticCountSharesCoresAndLeavesBusyCpus) {
  // cores, cpus, sharing calls, CPUs busy elsewhere (unknown: nullopt).
  EXPECT_EQ(automatic_threads(2, 2, 1, std::nullopt), 2);
  EXPECT_EQ(automatic_threads(2, 2, 1, 0), 2);
  EXPECT_EQ(automatic_threads(2, 2, 1, 1), 1);
  EXPECT_EQ(automatic_threads(2, 2, 1, 5), 1);  // never below one
  EXPECT_EQ(automatic_threads(2, 2, 2, 0), 1);
  EXPECT_EQ(automatic_threads(16, 16, 1, 4), 12);
  EXPECT_EQ(automatic_threads(16, 16, 4, 4), 4);
  EXPECT_EQ(automatic_threads(8, 16, 1, 8), 8);  // SMT: busy siblings leave the cores
  EXPECT_EQ(automatic_threads(8, 16, 1, 12), 4);
  EXPECT_EQ(automatic_threads(1, 1, 3, 0), 1);
}

TEST(ComputeThreads, AutomaticCountFallsToOneWhileOtherThreadsKeepEveryCpuBusy) {
  if (!cpus_busy_elsewhere(1, allowed_cpus().count)) {
    GTEST_SKIP() << "skipped: this process may not run on every CPU (a cpuset), so the system's "
                    "load does not tell its own CPUs' load";
  }
  // Plain threads, not a team's: to the count they are other work.
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  for (int i = 0; i < allowed_cpus().count; ++i) {
    spinners.emplace_back([&stop] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  // Two readings in a row: the count reacts to load that lasts, not a blip.
  int count = 0;
  for (int call = 0; call < 2; ++call) count = ComputeThreads(0).count();
  stop.store(true);
  for (std::thread& spinner : spinners) spinner.join();
  EXPECT_EQ(count, 1);
  EXPECT_EQ(ComputeThreads(3).count(), 3);  // an explicit count is kept whatever the load
}

}  // namespace
}  // namespace aft
