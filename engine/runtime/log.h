// The library's messages: to the application's callback (aft_log_set_callback), or else warnings
// and errors to stderr.
#pragma once

#include <string>

#include "aft.h"

namespace aft {

void set_log_callback(aft_log_callback callback, void* user_data);
void log_message(aft_log_level level, const std::string& message);

}  // namespace aft
