// Command-line values for the tools: strict parsing, messages that name the flag and the range.
#pragma once

#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>

#include "aft.h"

namespace aft::cli {

// Bad usage: the tools print it with their usage text and exit with status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

long long parse_integer(const std::string& flag, const std::string& text, long long min,
                        long long max);
float parse_float(const std::string& flag, const std::string& text, float min, float max);
// --matmul-precision's value: "f32" or "bf16".
aft_matmul_precision parse_matmul_precision(const std::string& flag, const std::string& text);
// llama.cpp's TOKEN_ID+BIAS or TOKEN_ID-BIAS ("15+1", "15-inf": a ban); +inf is refused.
aft_logit_bias parse_logit_bias(const std::string& flag, const std::string& text);

// The tools' argument loop: flags, some with a value, and positional arguments.
//   cli::Arguments args(argc, argv);
//   while (args.next()) { if (args.arg() == "--port") port = args.value(); ... }
class Arguments {
 public:
  Arguments(int argc, const char* const* argv) : argc_(argc), argv_(argv) {}
  // Moves to the next argument; false after the last.
  bool next() {
    if (++i_ >= argc_) return false;
    arg_ = argv_[i_];
    return true;
  }
  const std::string& arg() const { return arg_; }
  // The current flag's value, the argument after it (consumed).
  std::string value() {
    if (i_ + 1 >= argc_) throw UsageError(arg_ + ": missing value");
    return argv_[++i_];
  }
  // Whether the current argument asks for the usage (-h, --help).
  bool help() const { return arg_ == "-h" || arg_ == "--help"; }
  // The current argument as a positional one: an unknown option is bad usage ("-" is not one).
  const std::string& positional() const {
    if (arg_.size() > 1 && arg_[0] == '-') {
      throw UsageError("unknown option " + arg_ + " (see --help)");
    }
    return arg_;
  }
  // The current argument as the tool's one positional MODEL: an unknown option or a second model
  // is bad usage.
  void model(std::string& model) const {
    positional();
    if (!model.empty()) {
      throw UsageError("unexpected argument \"" + arg_ + "\" (the model is already " + model + ")");
    }
    model = arg_;
  }

 private:
  int argc_;
  const char* const* argv_;
  int i_ = 0;
  std::string arg_;
};

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

// A tool's main: parse() returns the options, or nothing for --help (the usage goes to stdout,
// exit 0); a UsageError prints the message and the usage (exit 2); run(options) returns the exit
// status, and any exception it throws is reported on stderr (exit 1).
template <class Parse, class Run>
int tool_main(const char* name, const char* usage, const Parse& parse, const Run& run) {
  decltype(parse()) options;
  try {
    options = parse();
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s\n\n%s", name, e.what(), usage);
    return kExitUsage;
  }
  if (!options) {
    std::fputs(usage, stdout);
    return 0;
  }
  try {
    return run(*options);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "\n%s: %s\n", name, e.what());
    return kExitError;
  }
}

}  // namespace aft::cli
