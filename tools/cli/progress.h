// A tool's progress: one line on stderr, rewritten in place; silent when stderr is not a terminal
// (logs, CI, tests), so that it never mixes into captured output.
#pragma once

#include <string>

namespace aft::cli {

class Progress {
 public:
  explicit Progress(std::string tool);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void show(const std::string& text);
  void clear();

 private:
  std::string tool_;
  bool enabled_;
};

}  // namespace aft::cli
