// How far the long-run tests go, at how many places rollback_test fails a call, and how many tokens
// the adversarial AFT-full prefill test runs. Where every step is slow they check fewer: under the
// sanitizers (instrumented -O1 builds, where the SIMD kernels run about 50 times slower: there the
// tests check memory and undefined behaviour, the Release build the length) and under emulation
// (tests/run-aarch64.sh sets AFT_TEST_EMULATED).
#pragma once

#include <cstdlib>

namespace aft::test_data {

inline bool slow_test_run() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return true;
#endif
#endif
  return std::getenv("AFT_TEST_EMULATED") != nullptr;
}

}  // namespace aft::test_data
