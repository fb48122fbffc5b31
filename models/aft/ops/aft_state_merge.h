// Merging two states of the streaming AFT accumulator (docs/aft-math.md, "Merging two states"):
// (m, a, b) and a partial (pm, pa, pb) over other positions give the state over both, with one
// exp. The merge is associative (up to rounding), which lets a prefill compute parts of a sequence
// apart. In float64, as the accumulator keeps its sums (kernels.h, aft_accumulate_f32): a
// session's sums merged with a prompt's partial sums stay as exact as if the prompt had been
// decoded.
#pragma once

#include <cstddef>
#include <limits>

#include "exp_nonpositive.h"

namespace aft {

struct AftState {
  double m, a, b;
};

// As the streaming kernel adds an entry (kernels/f32_aft_accumulate.hpp); from m = -inf it yields
// the partial itself, exactly, and an empty partial (pm = -inf) changes nothing, even when the
// state is empty too (where pm - m would be NaN). Written with selects on values, not branches, so
// that loops over it vectorize.
inline AftState merge(double m, double a, double b, double pm, double pa, double pb) {
  const bool grew = pm > m;
  const bool empty = pm == -std::numeric_limits<double>::infinity();
  const double e = empty ? 0.0 : exp_nonpositive(grew ? m - pm : pm - m);
  const double old_scale = grew ? e : 1.0;
  const double new_scale = grew ? 1.0 : e;
  return AftState{grew ? pm : m, a * old_scale + pa * new_scale, b * old_scale + pb * new_scale};
}

// (m, a, b) = merge((m, a, b), (pm, pa, pb)) over n channels. The arrays do not overlap.
inline void merge_states(std::size_t n, const double* __restrict pm, const double* __restrict pa,
                         const double* __restrict pb, double* __restrict m, double* __restrict a,
                         double* __restrict b) {
  for (std::size_t c = 0; c < n; ++c) {
    const AftState s = merge(m[c], a[c], b[c], pm[c], pa[c], pb[c]);
    m[c] = s.m;
    a[c] = s.a;
    b[c] = s.b;
  }
}

}  // namespace aft
