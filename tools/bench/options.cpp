#include "tools/bench/options.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>

#include "engine/runtime/physical_cores.h"
#include "tools/cli/arguments.h"

namespace aft::bench {

using cli::parse_integer;

const char kUsage[] =
    "usage: aft-bench MODEL [options]\n"
    "\n"
    "Measures prefill (pp) and decode (tg) speed of an AFT model, next to the machine's limits\n"
    "measured in the same run: read bandwidth from memory and over a buffer the size of the\n"
    "weights (decode reads every matmul weight once per token), FMA peak (prefill does ~2\n"
    "FLOPs per matmul weight per token, and 4 per channel for each pair of positions that\n"
    "AFT-full, AFT-local and AFT-conv weigh), the peaks of oneDNN's bf16 products on the matrix\n"
    "units and of its int8 products (a prompt of bf16 or q8_0 weights is measured against\n"
    "them), and the cost of a parallel region (each op that splits its work pays it). Lists\n"
    "are comma-separated; every combination is run.\n"
    "\n"
    "options:\n"
    "  -m, --model PATH          model file (or give it as the first argument)\n"
    "  -p, --n-prompt N,...      prompt lengths to prefill, one eval each (default 512; 0 = none)\n"
    "  -n, --n-gen N,...         tokens to decode one at a time (default 128; 0 = none)\n"
    "  -d, --n-depth N,...       decode after N context tokens (prefilled, untimed; default 0)\n"
    "  -b, --batch N,...         sessions decoding together, a token each per step\n"
    "                            (aft_batch_decode; tokens/s counts every session's; default 1)\n"
    "  -t, --threads N,...       threads (default: 1 and the number of physical cores); 0 =\n"
    "                            automatic, the sessions' default (the physical cores, fewer\n"
    "                            while other processes keep CPUs busy)\n"
    "  -r, --repetitions N       timed runs per test, after one warm-up (default 5)\n"
    "  -o, --output md|json      report format (default md)\n"
    "      --no-limits           skip measuring the machine's limits\n"
    "      --bandwidth-mib N     buffer of the read-bandwidth probe, MiB (default 1024)\n"
    "      --no-checksum         skip verifying tensor checksums when loading\n"
    "      --matmul-precision P  f32 (default) or bf16: prompts' products of f32 weights on\n"
    "                            the matrix units, if the CPU has them (aft-run --help)\n"
    "      --no-mmap             no effect: every weight matrix is packed into memory at load\n"
    "                            rather than read the mapped file (aft-run --help)\n"
    "  -h, --help                show this help\n"
    "\n"
    "Exit status: 0 success, 1 an error (file, model), 2 bad usage.\n";

namespace {

template <class T>
std::vector<T> parse_list(const std::string& flag, const std::string& text, long long min,
                          long long max) {
  std::vector<T> values;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    const T value = static_cast<T>(parse_integer(flag, item, min, max));
    if (std::find(values.begin(), values.end(), value) == values.end()) values.push_back(value);
    if (comma == std::string::npos) return values;
    start = comma + 1;
  }
}

// Positions and token counts: the session API takes size_t counts of int32 tokens.
constexpr long long kMaxTokens = std::numeric_limits<int32_t>::max();

}  // namespace

std::optional<Options> parse_args(int argc, const char* const* argv) {
  Options options;
  cli::Arguments args(argc, argv);
  while (args.next()) {
    const std::string& arg = args.arg();
    auto value = [&] { return args.value(); };
    if (args.help()) return std::nullopt;
    if (arg == "-m" || arg == "--model") {
      options.model = value();
    } else if (arg == "-p" || arg == "--n-prompt") {
      options.n_prompt = parse_list<int64_t>(arg, value(), 0, kMaxTokens);
    } else if (arg == "-n" || arg == "--n-gen") {
      options.n_gen = parse_list<int64_t>(arg, value(), 0, kMaxTokens);
    } else if (arg == "-d" || arg == "--n-depth") {
      options.depth = parse_list<int64_t>(arg, value(), 0, kMaxTokens);
    } else if (arg == "-b" || arg == "--batch") {
      options.batch = parse_list<int64_t>(arg, value(), 1, 4096);
    } else if (arg == "-t" || arg == "--threads") {
      options.threads = parse_list<int>(arg, value(), 0, 1024);
    } else if (arg == "-r" || arg == "--repetitions") {
      options.repetitions = static_cast<int>(parse_integer(arg, value(), 1, 100000));
    } else if (arg == "-o" || arg == "--output") {
      const std::string format = value();
      if (format == "md") {
        options.format = Format::Markdown;
      } else if (format == "json") {
        options.format = Format::Json;
      } else {
        throw UsageError(arg + ": expected md or json, found \"" + format + "\"");
      }
    } else if (arg == "--no-limits") {
      options.limits = false;
    } else if (arg == "--bandwidth-mib") {
      options.bandwidth_mib = static_cast<std::size_t>(parse_integer(arg, value(), 1, 1 << 20));
    } else if (options.load.parse(args)) {
    } else {
      args.model(options.model);
    }
  }
  if (options.model.empty()) throw UsageError("no model given");
  if (options.threads.empty()) {
    options.threads = {1};
    if (physical_cores() > 1) options.threads.push_back(physical_cores());
  }
  return options;
}

}  // namespace aft::bench
