// aft-eval: how well a model predicts a text (bits per character, per token, perplexity), and
// with --reference how far its predictions are from another model's (docs/evaluation.md). The
// report goes to stdout; a progress line to stderr when it is a terminal.
// Exit codes: 0 success, 1 an error (file, model, text), 2 bad usage.
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tools/cli/arguments.h"
#include "tools/cli/progress.h"
#include "tools/cli/text_file.h"
#include "tools/eval/eval_model.h"
#include "tools/eval/evaluation.h"
#include "tools/eval/options.h"
#include "tools/eval/report.h"

namespace aft::eval {
namespace {

std::string read_text(const std::string& path) {
  std::string text = cli::read_text_file(path, "the text file");
  if (text.empty()) throw std::runtime_error(path + ": the text file is empty");
  return text;
}

int run(const Options& o) {
  cli::Progress progress("aft-eval");
  const std::string text = read_text(o.text_file);
  progress.show("loading " + o.model);
  const auto threads = static_cast<int32_t>(o.threads);
  const EvalModel model(o.model, threads, o.matmul_precision);
  std::unique_ptr<const EvalModel> reference;
  if (o.reference) {
    progress.show("loading " + *o.reference);
    reference = std::make_unique<const EvalModel>(*o.reference, threads);
    model.require_same_vocabulary(*reference);
  }

  const std::vector<int32_t> tokens = model.tokenize(text, o.text_file);
  if (tokens.size() < 2) {
    throw std::runtime_error(o.text_file + ": one token, nothing to predict (the first token of " +
                             "a text is not scored): give at least two");
  }
  Report report;
  report.model = o.model;
  report.text_file = o.text_file;
  report.reference = o.reference;
  report.tokenizer = model.info().tokenizer;
  report.window = choose_window(model, reference.get(), o.window);
  const std::vector<Window> windows = plan_windows(tokens.size(), report.window);
  report.windows = windows.size();
  report.decode = o.decode;

  const auto start = std::chrono::steady_clock::now();
  report.totals = evaluate(model, reference.get(), tokens, windows, o.decode, progress);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  progress.clear();

  if (o.json) {
    write_json(report, stdout);
  } else {
    write_text(report, stdout);
  }
  return 0;
}

}  // namespace
}  // namespace aft::eval

int main(int argc, char** argv) {
  using namespace aft::eval;
  return aft::cli::tool_main(
      "aft-eval", kUsage, [&] { return parse_args(argc, argv); }, run);
}
