#include "tools/eval/options.h"

#include <cstdint>
#include <limits>

#include "aft.h"
#include "tools/cli/arguments.h"

namespace aft::eval {

const char kUsage[] =
    "usage: aft-eval MODEL TEXT_FILE [options]\n"
    "\n"
    "How well a model predicts a text: bits per character, bits per token and perplexity over\n"
    "every token of the text but the first (docs/evaluation.md). Characters are the text's\n"
    "Unicode code points for a character model, its bytes for a byte model.\n"
    "\n"
    "Windows: a model with absolute positions (max_positions > 0: AFT-local, AFT-full, learned\n"
    "positions) reads the text in windows of max_positions + 1 tokens overlapping by one, each\n"
    "from a fresh state; any other model reads it as one stream.\n"
    "\n"
    "options:\n"
    "      --reference PATH   also compare with another model of the same vocabulary (the base,\n"
    "                         e.g. the unquantized one): mean and max KL(P_reference || P_model)\n"
    "                         in nats per position, and the share of positions where both\n"
    "                         predict the same most likely token; both read the same windows\n"
    "      --window N         windows of N + 1 tokens for every model (at most a model's\n"
    "                         max_positions)\n"
    "      --decode           feed the text one token per call, as generation does, instead of\n"
    "                         256-token prompt chunks: for quantized models the one-token path\n"
    "                         (q8_0: activations rounded to 8-bit blocks) is what is measured\n"
    "      --matmul-precision P\n"
    "                         f32 (default) or bf16: MODEL's products of f32 weights in prompt\n"
    "                         chunks on the matrix units, if the CPU has them, weights and\n"
    "                         inputs rounded to bf16 (with --reference MODEL: its KL divergence)\n"
    "  -t, --threads N        threads; 0 = one per physical core (default 0)\n"
    "      --json             print one JSON object instead of the table\n"
    "  -h, --help             show this help\n"
    "\n"
    "exit status: 0 success, 1 an error (file, model, text), 2 bad usage\n";

std::optional<Options> parse_args(int argc, char** argv) {
  Options options;
  int positional = 0;
  cli::Arguments args(argc, argv);
  while (args.next()) {
    const std::string& arg = args.arg();
    auto value = [&] { return args.value(); };
    if (args.help()) return std::nullopt;
    if (arg == "--reference") {
      options.reference = value();
    } else if (arg == "--window") {
      options.window = cli::parse_integer(arg, value(), 1, std::numeric_limits<int32_t>::max());
    } else if (arg == "-t" || arg == "--threads") {
      options.threads = cli::parse_integer(arg, value(), 0, AFT_MAX_THREADS);
    } else if (arg == "--matmul-precision") {
      options.matmul_precision = cli::parse_matmul_precision(arg, value());
    } else if (arg == "--decode") {
      options.decode = true;
    } else if (arg == "--json") {
      options.json = true;
    } else if (!arg.empty() && arg[0] == '-') {
      throw cli::UsageError("unknown option " + arg + " (see --help)");
    } else if (positional == 0) {
      options.model = arg;
      ++positional;
    } else if (positional == 1) {
      options.text_file = arg;
      ++positional;
    } else {
      throw cli::UsageError("unexpected argument \"" + arg + "\" (the model and the text are " +
                            options.model + " and " + options.text_file + ")");
    }
  }
  if (positional < 2) throw cli::UsageError("expected a MODEL and a TEXT_FILE");
  return options;
}

}  // namespace aft::eval
