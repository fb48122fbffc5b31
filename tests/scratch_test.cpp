// The session's scratch (engine/runtime/scratch.h): an object per type and thread of a call, the
// same one from call to call, and the calling thread's outside the call's team runs.
#include "engine/runtime/scratch.h"

#include "kernels/thread_team.h"

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
  kernels::ThreadTeam::of_this_thread().run(kThreads, [&](kernels::TeamMember member) {
    seen[static_cast<std::size_t>(member.id)] = &scratch.local<Numbers>();
    // A run nested in the call's keeps its thread's slot.
    kernels::parallel_parts(2, 2, [&](std::size_t) {
      EXPECT_EQ(&scratch.local<Numbers>(), seen[static_cast<std::size_t>(member.id)]);
    });
  });
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_NE(seen[static_cast<std::size_t>(t)], nullptr);
    for (int u = 0; u < t; ++u)
      EXPECT_NE(seen[static_cast<std::size_t>(t)], seen[static_cast<std::size_t>(u)]);
  }
  EXPECT_EQ(seen[0], outside);  // member 0 of the run is the calling thread
}

TEST(Scratch, ACallFromAnApplicationsOpenMpRegionUsesTheCallsSlots) {
  // A call made from thread 1 of the application's OpenMP region: outside its own runs it uses
  // slot 0, not the application's thread number.
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
