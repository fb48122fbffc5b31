// Runs a tool as a user would, capturing its output and exit code.
#pragma once

#include <string>

namespace aft::testing {

struct CommandResult {
  int exit_code = -1;  // -1 if the program did not exit normally
  std::string out, err;
};

// A shell word that stands for s exactly.
std::string shell_quote(const std::string& s);

// Runs `program args` through the shell (args are already quoted as needed).
CommandResult run_command(const std::string& program, const std::string& args);

}  // namespace aft::testing
