#include "tools/cli/progress.h"

#include <unistd.h>

#include <cstdio>
#include <utility>

namespace aft::cli {

Progress::Progress(std::string tool)
    : tool_(std::move(tool)), enabled_(isatty(STDERR_FILENO) != 0) {}

Progress::~Progress() { clear(); }

void Progress::show(const std::string& text) {
  if (!enabled_) return;
  std::fprintf(stderr, "\r\033[K%s: %s", tool_.c_str(), text.c_str());
  std::fflush(stderr);
}

void Progress::clear() {
  if (enabled_) std::fprintf(stderr, "\r\033[K");
}

}  // namespace aft::cli
