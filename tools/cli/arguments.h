// Command-line values for the tools: strict parsing, messages that name the flag and the range.
#pragma once

#include <stdexcept>
#include <string>

namespace aft::cli {

// Bad usage: the tools print it with their usage text and exit with status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

long long parse_integer(const std::string& flag, const std::string& text, long long min,
                        long long max);
float parse_float(const std::string& flag, const std::string& text, float min, float max);

}  // namespace aft::cli
