// The pair-wise position bias w[t, t'] of each AFT variant (docs/format.md, "Position bias").
// Positions t - window < t' <= t get a bias; older ones join the global sum with bias 0.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "aft_config.h"

namespace aft {

class PositionBias {
 public:
  virtual ~PositionBias() = default;
  // 0: no windowed positions (AFT-simple).
  virtual int64_t window() const = 0;
  // The bias shared by every channel, for query position t and key position tp.
  virtual float scalar(int64_t t, int64_t tp) const = 0;
  // scalar(t, tp) for tp in [begin, end), into out[0, end - begin): a prompt's rows of biases.
  virtual void row(int64_t t, int64_t begin, int64_t end, float* out) const {
    for (int64_t tp = begin; tp < end; ++tp) out[tp - begin] = scalar(t, tp);
  }
  // For biases that differ per channel: the d-channel row for distance t - tp; null otherwise.
  virtual const float* per_channel(int64_t distance) const = 0;
  // For those, the window's weights per channel: exp(w - max_w) for distance t - tp, and max_w
  // (the largest bias over the window's distances); null otherwise.
  virtual const float* per_channel_exp(int64_t) const { return nullptr; }
  virtual const float* per_channel_max() const { return nullptr; }
};

// The tensors a mixer's bias reads (null when the variant has none), f32 as in the file.
struct PositionBiasWeights {
  const float* pos_bias = nullptr;
  const float* pos_u = nullptr;
  const float* pos_v = nullptr;
};

std::unique_ptr<PositionBias> make_position_bias(const ModelConfig& config,
                                                 const PositionBiasWeights& weights);

}  // namespace aft
