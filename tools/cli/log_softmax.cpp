#include "tools/cli/log_softmax.h"

#include <algorithm>
#include <cmath>

namespace aft::cli {

size_t log_softmax(const float* logits, size_t n, double* out) {
  const size_t top = static_cast<size_t>(std::max_element(logits, logits + n) - logits);
  const double peak = logits[top];
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - peak);
  const double log_total = peak + std::log(sum);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<double>(logits[i]) - log_total;
  return top;
}

}  // namespace aft::cli
