#include "log.h"

#include <cstdio>

namespace aft {
namespace {

// Set before other threads use the library (aft.h), read by any.
aft_log_callback log_callback = nullptr;
void* log_user_data = nullptr;

}  // namespace

void set_log_callback(aft_log_callback callback, void* user_data) {
  log_callback = callback;
  log_user_data = user_data;
}

void log_message(aft_log_level level, const std::string& message) {
  if (log_callback) {
    log_callback(level, message.c_str(), log_user_data);
  } else if (level == AFT_LOG_ERROR || level == AFT_LOG_WARNING) {
    std::fprintf(stderr, "aft: %s\n", message.c_str());
  }
}

}  // namespace aft
