#include "tools/eval/evaluation.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace aft::eval {
namespace {

// Tokens per aft_session_eval call: bounds the logits buffer (chunk x vocab floats); the chunks
// change no figure beyond float rounding.
constexpr size_t kChunk = 256;

void feed(const EvalModel& model, const int32_t* tokens, size_t n, std::vector<float>& logits) {
  cli::check(aft_session_eval(model.session(), tokens, n, AFT_LOGITS_ALL, logits.data()),
             "evaluating " + model.path());
}

}  // namespace

std::vector<Window> plan_windows(size_t n_tokens, size_t window) {
  std::vector<Window> windows;
  if (n_tokens < 2) return windows;
  const size_t step = window > 0 ? window : n_tokens - 1;
  for (size_t first = 0; first < n_tokens - 1; first += step) {
    windows.push_back({first, std::min(step, n_tokens - 1 - first)});
  }
  return windows;
}

size_t choose_window(const EvalModel& model, const EvalModel* reference,
                     const std::optional<long long>& forced) {
  size_t window = forced ? static_cast<size_t>(*forced) : 0;
  for (const EvalModel* m : {&model, reference}) {
    if (m == nullptr || m->info().max_positions == 0) continue;
    const auto limit = static_cast<size_t>(m->info().max_positions);
    if (forced && window > limit) {
      throw std::runtime_error("--window " + std::to_string(window) + ": " + m->path() +
                               " reads at most " + std::to_string(limit) + " positions");
    }
    if (!forced) window = window == 0 ? limit : std::min(window, limit);
  }
  return window;
}

Totals evaluate(const EvalModel& model, const EvalModel* reference,
                const std::vector<int32_t>& tokens, const std::vector<Window>& windows, bool decode,
                cli::Progress& progress) {
  const size_t chunk = decode ? 1 : kChunk;
  const auto vocab = static_cast<size_t>(model.info().vocab_size);
  std::vector<float> logits(kChunk * vocab);
  std::vector<float> reference_logits(reference != nullptr ? kChunk * vocab : 0);
  Scorer scorer(model.info().vocab_size);
  const size_t scored = tokens.size() - 1;
  for (size_t w = 0; w < windows.size(); ++w) {
    const Window& window = windows[w];
    cli::check(aft_session_reset(model.session()), "resetting " + model.path());
    if (reference != nullptr) {
      cli::check(aft_session_reset(reference->session()), "resetting " + reference->path());
    }
    for (size_t done = 0; done < window.length; done += chunk) {
      const size_t first = window.first + done;
      const size_t n = std::min(chunk, window.length - done);
      feed(model, &tokens[first], n, logits);
      if (reference != nullptr) feed(*reference, &tokens[first], n, reference_logits);
      scorer.add(logits.data(), reference != nullptr ? reference_logits.data() : nullptr,
                 &tokens[first + 1], n);
      for (size_t i = first + 1; i <= first + n; ++i) {
        scorer.count_characters(model.characters(tokens[i]));
      }
      // Token by token, a line per chunk's worth: a terminal keeps up.
      if (!decode || (done + n) % kChunk == 0 || done + n == window.length) {
        progress.show("window " + std::to_string(w + 1) + "/" + std::to_string(windows.size()) +
                      ", " + std::to_string(first + n) + "/" + std::to_string(scored) + " tokens");
      }
    }
  }
  return scorer.totals();
}

}  // namespace aft::eval
