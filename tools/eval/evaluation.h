// The windows a text is read in, and reading it: one or two models over the same windows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "tools/cli/progress.h"
#include "tools/eval/eval_model.h"
#include "tools/eval/scoring.h"

namespace aft::eval {

// A window is fed tokens [first, first + length) from a fresh state and scores the next token at
// each of its positions: tokens [first + 1, first + length + 1).
struct Window {
  size_t first;
  size_t length;
};

// Consecutive windows of `window` + 1 tokens overlapping by one, covering every token but the
// first exactly once; window 0: one window over the whole text (one stream).
std::vector<Window> plan_windows(size_t n_tokens, size_t window);

// The window length both models can read (0: one stream): --window if given, else the smaller
// max_positions of the two; throws if --window exceeds a model's max_positions.
size_t choose_window(const EvalModel& model, const EvalModel* reference,
                     const std::optional<long long>& forced);

// Scores tokens over the windows with model (and reference, if not null, on the same chunks):
// chunks of up to 256 tokens, or of one token each with `decode`.
Totals evaluate(const EvalModel& model, const EvalModel* reference,
                const std::vector<int32_t>& tokens, const std::vector<Window>& windows, bool decode,
                cli::Progress& progress);

}  // namespace aft::eval
