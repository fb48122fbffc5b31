// Elapsed time as the tools report it: milliseconds on the steady clock.
#pragma once

#include <chrono>

namespace aft::cli {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace aft::cli
