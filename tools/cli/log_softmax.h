// Log-probabilities from a row of logits, in double: a long vocabulary's sum loses little.
#pragma once

#include <cstddef>

namespace aft::cli {

// Writes log-softmax(logits[0..n)) to out; returns the index of the largest logit (the first one
// on a tie).
size_t log_softmax(const float* logits, size_t n, double* out);

}  // namespace aft::cli
