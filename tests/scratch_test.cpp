// The session's scratch (engine/runtime/scratch.h): an object per type and thread of a call, the
// same one from call to call, and the calling thread's outside the call's parallel regions.
#include "engine/runtime/scratch.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <vector>

namespace aft {
namespace {

struct Numbers {
  std::vector<int> values;
};
struct OtherNumbers {
  std::vector<int> values;
};

TEST(Scratch, EachTypeHasItsOwnObject) {
  Scratch scratch;
  scratch.begin_call(1);
  Numbers& numbers = scratch.local<Numbers>();
  OtherNumbers& other = scratch.local<OtherNumbers>();
  EXPECT_NE(static_cast<void*>(&numbers), static_cast<void*>(&other));
  numbers.values.assign(100, 1);
  scratch.begin_call(1);
  EXPECT_EQ(&scratch.local<Numbers>(), &numbers);  // kept, with its contents and capacity
  EXPECT_EQ(numbers.values.size(), 100u);
}

TEST(Scratch, EachThreadOfACallHasItsOwnObject) {
  constexpr int kThreads = 4;
  Scratch scratch;
  scratch.begin_call(kThreads);
  Numbers* outside = &scratch.local<Numbers>();
  std::vector<Numbers*> seen(kThreads, nullptr);
#pragma omp parallel num_threads(kThreads)
  seen[static_cast<std::size_t>(omp_get_thread_num())] = &scratch.local<Numbers>();
  for (int t = 0; t < omp_get_max_threads() && t < kThreads; ++t) {
    if (seen[static_cast<std::size_t>(t)] == nullptr) continue;  // fewer threads given
    for (int u = 0; u < t; ++u)
      EXPECT_NE(seen[static_cast<std::size_t>(t)], seen[static_cast<std::size_t>(u)]);
  }
  EXPECT_EQ(seen[0], outside);  // thread 0 of the region is the calling thread
}

TEST(Scratch, ACallFromAnApplicationRegionIndexesItsOwnRegions) {
  // A call made from thread 1 of the application's region: outside its own regions it uses slot
  // 0, not the application's thread number.
  Numbers* in_call = nullptr;
#pragma omp parallel num_threads(2)
  if (omp_get_thread_num() == omp_get_num_threads() - 1) {
    Scratch scratch;
    scratch.begin_call(1);
    in_call = &scratch.local<Numbers>();
  }
  EXPECT_NE(in_call, nullptr);
}

}  // namespace
}  // namespace aft
