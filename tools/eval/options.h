// aft-eval's command line.
#pragma once

#include <optional>
#include <string>

namespace aft::eval {

extern const char kUsage[];

struct Options {
  std::string model;
  std::string text_file;
  std::optional<std::string> reference;
  std::optional<long long> window;  // forced window length; otherwise the models decide
  long long threads = 0;            // 0: automatic
  bool decode = false;  // one token per call (the decode path) rather than prefill chunks
  bool json = false;
};

// nullopt for --help; throws cli::UsageError for bad usage.
std::optional<Options> parse_args(int argc, char** argv);

}  // namespace aft::eval
