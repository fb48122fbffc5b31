#include "tools/cli/arguments.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <sstream>

namespace aft::cli {

long long parse_integer(const std::string& flag, const std::string& text, long long min,
                        long long max) {
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0])) || *end != '\0' ||
      errno == ERANGE || value < min || value > max) {
    throw UsageError(flag + ": expected an integer in [" + std::to_string(min) + ", " +
                     std::to_string(max) + "], found \"" + text + "\"");
  }
  return value;
}

aft_matmul_precision parse_matmul_precision(const std::string& flag, const std::string& text) {
  if (text == "f32") return AFT_MATMUL_PRECISION_F32;
  if (text == "bf16") return AFT_MATMUL_PRECISION_BF16;
  throw UsageError(flag + ": \"" + text + "\" is not a precision (f32 or bf16)");
}

float parse_float(const std::string& flag, const std::string& text, float min, float max) {
  errno = 0;
  char* end = nullptr;
  const float value = std::strtof(text.c_str(), &end);
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0])) || *end != '\0' ||
      errno == ERANGE || !std::isfinite(value) || value < min || value > max) {
    std::ostringstream range;
    range << "[" << min << ", " << max << "]";
    throw UsageError(flag + ": expected a number in " + range.str() + ", found \"" + text + "\"");
  }
  return value;
}

aft_logit_bias parse_logit_bias(const std::string& flag, const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return UsageError(flag + ": expected TOKEN_ID+BIAS or TOKEN_ID-BIAS (e.g. 15+1, 15-inf), " +
                      why + ", found \"" + text + "\"");
  };
  const std::size_t sign = text.find_first_of("+-");
  if (sign == 0 || sign == std::string::npos || text.find_first_not_of("0123456789") != sign) {
    throw bad("the token id in decimal digits then the sign");
  }
  errno = 0;
  const long long token = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE || token > std::numeric_limits<int32_t>::max()) {
    throw bad("a token id up to " + std::to_string(std::numeric_limits<int32_t>::max()));
  }
  const std::string magnitude = text.substr(sign + 1);
  char* end = nullptr;
  errno = 0;
  const float value = std::strtof(magnitude.c_str(), &end);
  const float bias = text[sign] == '-' ? -value : value;
  // One sign, the one after the id: strtof would also take spaces and a second sign first.
  const bool starts_right = !magnitude.empty() && magnitude[0] != '+' && magnitude[0] != '-' &&
                            !std::isspace(static_cast<unsigned char>(magnitude[0]));
  if (!starts_right || *end != '\0' || errno == ERANGE || std::isnan(bias)) {
    throw bad("a number for the bias");
  }
  if (bias == INFINITY) throw bad("a bias below +inf (a large number forces a token)");
  return aft_logit_bias{static_cast<int32_t>(token), bias};
}

}  // namespace aft::cli
