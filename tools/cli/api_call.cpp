#include "tools/cli/api_call.h"

namespace aft::cli {

ApiError::ApiError(const std::string& doing, aft_status status)
    : std::runtime_error(doing + ": " + aft_last_error() + " [" + aft_status_string(status) + "]") {
}

void check(aft_status status, const std::string& doing) {
  if (status != AFT_OK) throw ApiError(doing, status);
}

}  // namespace aft::cli
