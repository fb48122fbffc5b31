// The one exception type inside the engine; the C API turns it into a status and a message.
#pragma once

#include <stdexcept>
#include <string>

#include "aft.h"

namespace aft {

class Error : public std::runtime_error {
 public:
  Error(aft_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  aft_status status() const noexcept { return status_; }

 private:
  aft_status status_;
};

}  // namespace aft
