// aft-bench's command line: llama-bench's conventions (comma lists, their product is run).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tools/cli/arguments.h"
#include "tools/cli/model_flags.h"

namespace aft::bench {

enum class Format { Markdown, Json };

struct Options {
  std::string model;
  std::vector<int64_t> n_prompt{512};  // pp tests: prompt lengths (0 = none)
  std::vector<int64_t> n_gen{128};     // tg tests: decoded tokens (0 = none)
  std::vector<int64_t> depth{0};       // tg tests: context tokens before the timed decode
  std::vector<int64_t> batch{1};       // tg tests: sessions decoding together
  std::vector<int> threads;            // default: 1 and the number of physical cores
  int repetitions = 5;
  Format format = Format::Markdown;
  bool limits = true;                // measure read bandwidth and FMA peak per thread count
  std::size_t bandwidth_mib = 1024;  // the read probe's buffer
  cli::ModelFlags load;              // --no-checksum, --matmul-precision, --no-mmap
};

using cli::UsageError;

extern const char kUsage[];

// Throws UsageError on a bad command line; nullopt when --help was asked for.
std::optional<Options> parse_args(int argc, const char* const* argv);

}  // namespace aft::bench
