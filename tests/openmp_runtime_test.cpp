// One OpenMP runtime does the work. oneDNN (Debian's, built with GCC) calls libgomp's entry points
// (GOMP_parallel, omp_get_max_threads, ...); the project's regions call its compiler's runtime:
// libgomp under GCC, clang's libomp under clang (the ThreadSanitizer and fuzzing builds). libomp
// also exports libgomp's entry points, and the project links it ahead of oneDNN, so oneDNN's calls
// bind to it: libgomp is mapped (oneDNN needs it) but none of its functions runs. Were it the
// other way round, two runtimes would each keep a pool of threads spinning against the other's.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "kernels/matmul.h"

namespace {

// The file of the library that defines address.
std::string library_of(void* address) {
  Dl_info info{};
  if (address == nullptr || dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

TEST(OpenMpRuntime, OneDnnCallsTheRuntimeOfTheProjectsRegions) {
  // oneDNN in the process (its OpenMP calls are bound at load, as the process's scope orders).
  EXPECT_NE(aft::kernels::matmul_description().find("oneDNN"), std::string::npos);
  const std::string onednn_calls = library_of(dlvsym(RTLD_DEFAULT, "GOMP_parallel", "GOMP_4.0"));
  ASSERT_FALSE(onednn_calls.empty()) << "no GOMP_parallel@GOMP_4.0 in the process";
  // clang's regions start through __kmpc_fork_call (libomp only); GCC's through GOMP_parallel.
  void* kmpc = dlsym(RTLD_DEFAULT, "__kmpc_fork_call");
  const std::string ours = kmpc ? library_of(kmpc) : onednn_calls;
  EXPECT_EQ(onednn_calls, ours);
  EXPECT_EQ(library_of(dlvsym(RTLD_DEFAULT, "omp_get_max_threads", "OMP_1.0")), ours);
}

}  // namespace
