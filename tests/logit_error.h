// How far a run's logits are from a reference's, for tests of paths that agree within rounding.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace aft::testing {

// The largest difference within each row of `row` logits, relative to that row's largest logit in
// magnitude; the worst row's.
inline double max_relative_error(const std::vector<float>& got, const std::vector<float>& want,
                                 std::size_t row) {
  double worst = 0.0;
  for (std::size_t start = 0; start + row <= want.size() && start + row <= got.size();
       start += row) {
    double diff = 0.0, scale = 1e-30;
    for (std::size_t i = start; i < start + row; ++i) {
      diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - want[i]));
      scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

}  // namespace aft::testing
