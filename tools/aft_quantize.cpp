// aft-quantize: an f32 model file with its linear layers' weights converted to bf16 or q8_0
// (docs/format.md, "Tensor data types"); the output holds the same bits tools/aft_export.py
// --dtype writes. A progress line goes to stderr when it is a terminal.
// Exit codes: 0 success, 1 an error (file, model), 2 bad usage.
#include <optional>
#include <string>
#include <vector>

#include "engine/format/model_file.h"
#include "tools/cli/arguments.h"
#include "tools/cli/progress.h"
#include "tools/quantize/quantize_model.h"

namespace aft::quantize {
namespace {

const char kUsage[] =
    "usage: aft-quantize IN.aft OUT.aft bf16|q8_0\n"
    "\n"
    "Writes OUT.aft: the f32 model IN.aft with the weight matrices of its linear layers (query,\n"
    "key, value, output, feed-forward, head) stored as bf16 (2 bytes a weight) or q8_0 (8-bit\n"
    "quants with one f32 scale per 32 weights: 1.125 bytes a weight; a matrix whose column count\n"
    "is not a multiple of 32 stays f32). Embeddings, norms, biases and position biases stay f32.\n"
    "IN's checksums are verified first; OUT appears only once complete.\n"
    "\n"
    "options:\n"
    "  -h, --help   show this help\n"
    "\n"
    "exit status: 0 success, 1 an error (file, model), 2 bad usage\n";

struct Options {
  std::string in, out;
  DType dtype = DType::Q8_0;
};

std::optional<Options> parse_args(int argc, char** argv) {
  std::vector<std::string> positional;
  cli::Arguments args(argc, argv);
  while (args.next()) {
    if (args.help()) return std::nullopt;
    positional.push_back(args.positional());
  }
  if (positional.size() != 3) {
    throw cli::UsageError("expected IN.aft OUT.aft and a dtype, found " +
                          std::to_string(positional.size()) + " argument(s)");
  }
  Options options;
  options.in = positional[0];
  options.out = positional[1];
  const std::optional<DType> dtype = dtype_from_name(positional[2]);
  if (!dtype || *dtype == DType::F32) {
    throw cli::UsageError("dtype: expected bf16 or q8_0, found \"" + positional[2] + "\"");
  }
  options.dtype = *dtype;
  return options;
}

int run(const Options& o) {
  cli::Progress progress("aft-quantize");
  quantize_model(o.in, o.out, o.dtype, progress);
  return 0;
}

}  // namespace
}  // namespace aft::quantize

int main(int argc, char** argv) {
  using namespace aft::quantize;
  return aft::cli::tool_main(
      "aft-quantize", kUsage, [&] { return parse_args(argc, argv); }, run);
}
