// What the fuzz targets share: a broken contract aborts with what was expected, which libFuzzer
// reports as a crash with the input that caused it.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "aft.h"

namespace aft::fuzz {

inline void check(bool holds, const char* contract) {
  if (holds) return;
  std::fprintf(stderr, "contract broken: %s (last error: %s)\n", contract, aft_last_error());
  std::abort();
}

// A refusal is a status with a message, never AFT_ERR_INTERNAL (an unexpected exception).
inline void check_refusal(aft_status status, const char* call) {
  check(status != AFT_OK && status != AFT_ERR_INTERNAL && aft_last_error()[0] != '\0', call);
}

}  // namespace aft::fuzz
