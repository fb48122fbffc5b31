// aft-eval's command line.
#pragma once

#include <optional>
#include <string>

#include "aft.h"

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
  // MODEL's (not the reference's): prompt chunks' products of f32 weights in bf16 where the CPU
  // has matrix units
  aft_matmul_precision matmul_precision = AFT_MATMUL_PRECISION_F32;
};

// nullopt for --help; throws cli::UsageError for bad usage.
std::optional<Options> parse_args(int argc, char** argv);

}  // namespace aft::eval
