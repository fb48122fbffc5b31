#include "tools/cli/arguments.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace aft::cli {

long long parse_integer(const std::string& flag, const std::string& text, long long min,
                        long long max) {
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || value < min || value > max) {
    throw UsageError(flag + ": expected an integer in [" + std::to_string(min) + ", " +
                     std::to_string(max) + "], found \"" + text + "\"");
  }
  return value;
}

float parse_float(const std::string& flag, const std::string& text, float min, float max) {
  errno = 0;
  char* end = nullptr;
  const float value = std::strtof(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(value) || value < min ||
      value > max) {
    std::ostringstream range;
    range << "[" << min << ", " << max << "]";
    throw UsageError(flag + ": expected a number in " + range.str() + ", found \"" + text + "\"");
  }
  return value;
}

}  // namespace aft::cli
