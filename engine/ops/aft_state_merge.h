// Merging two states of the streaming AFT accumulator (docs/aft-math.md): (m, a, b) and a partial
// (pm, pa, pb) over other positions give the state over both, with one exp. The merge is
// associative (up to rounding), which lets a prefill compute parts of a sequence apart.
#pragma once

#include <cstddef>
#include <limits>

#include "exp_nonpositive.h"

namespace aft {

struct AftState {
  float m, a, b;
};

// As the streaming kernel adds an entry (kernels/f32_aft_accumulate.hpp); from m = -inf it yields
// the partial itself, exactly, and an empty partial (pm = -inf) changes nothing, even when the
// state is empty too (where pm - m would be NaN). Written with selects on values, not branches, so
// that loops over it vectorize.
inline AftState merge(float m, float a, float b, float pm, float pa, float pb) {
  const bool grew = pm > m;
  const bool empty = pm == -std::numeric_limits<float>::infinity();
  const float e = empty ? 0.0f : exp_nonpositive(grew ? m - pm : pm - m);
  const float old_scale = grew ? e : 1.0f;
  const float new_scale = grew ? 1.0f : e;
  return AftState{grew ? pm : m, a * old_scale + pa * new_scale, b * old_scale + pb * new_scale};
}

// (m, a, b) = merge((m, a, b), (pm, pa, pb)) over n channels. The arrays do not overlap.
inline void merge_states(std::size_t n, const float* __restrict pm, const float* __restrict pa,
                         const float* __restrict pb, float* __restrict m, float* __restrict a,
                         float* __restrict b) {
  for (std::size_t c = 0; c < n; ++c) {
    const AftState s = merge(m[c], a[c], b[c], pm[c], pa[c], pb[c]);
    m[c] = s.m;
    a[c] = s.a;
    b[c] = s.b;
  }
}

}  // namespace aft
