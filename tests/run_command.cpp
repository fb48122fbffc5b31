#include "run_command.h"

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "model_file_writer.h"

namespace aft::testing {

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

CommandResult run_command(const std::string& program, const std::string& args) {
  TempFile err_file("stderr");
  const std::string command =
      shell_quote(program) + " " + args + " 2> " + shell_quote(err_file.path());
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return result;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) result.out.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_file.path());
  result.err.assign(std::istreambuf_iterator<char>(err), std::istreambuf_iterator<char>());
  return result;
}

}  // namespace aft::testing
