#include "position_bias.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/format/error.h"

namespace aft {
namespace {

class NoBias final : public PositionBias {
 public:
  int64_t window() const override { return 0; }
  float scalar(int64_t, int64_t) const override { return 0.0f; }
  const float* per_channel(int64_t) const override { return nullptr; }
};

// AFT-local and AFT-full (table): an absolute T_max x T_max table, read within the window.
class TableBias final : public PositionBias {
 public:
  TableBias(const float* table, int64_t max_seq_len, int64_t window)
      : table_(table), max_seq_len_(max_seq_len), window_(window) {}
  int64_t window() const override { return window_; }
  float scalar(int64_t t, int64_t tp) const override { return table_[t * max_seq_len_ + tp]; }
  void row(int64_t t, int64_t begin, int64_t end, float* out) const override {
    std::copy(table_ + t * max_seq_len_ + begin, table_ + t * max_seq_len_ + end, out);
  }
  const float* per_channel(int64_t) const override { return nullptr; }

 private:
  const float* table_;
  int64_t max_seq_len_, window_;
};

// AFT-full (factorized): w[t, t'] = U[t] . V[t'].
class FactorizedBias final : public PositionBias {
 public:
  FactorizedBias(const float* u, const float* v, int64_t max_seq_len, int64_t rank)
      : u_(u), v_(v), max_seq_len_(max_seq_len), rank_(rank) {}
  int64_t window() const override { return max_seq_len_; }
  float scalar(int64_t t, int64_t tp) const override {
    const float* u = u_ + t * rank_;
    const float* v = v_ + tp * rank_;
    float sum = 0.0f;
    for (int64_t r = 0; r < rank_; ++r) sum += u[r] * v[r];
    return sum;
  }
  const float* per_channel(int64_t) const override { return nullptr; }

 private:
  const float* u_;
  const float* v_;
  int64_t max_seq_len_, rank_;
};

// AFT-conv: a relative bias per head, stored expanded to one row of d channels per distance so the
// accumulator kernel reads it like the keys.
class RelativeHeadBias final : public PositionBias {
 public:
  RelativeHeadBias(const float* pos_bias, int64_t n_heads, int64_t window, int64_t d_model)
      : window_(window),
        d_model_(d_model),
        rows_(static_cast<std::size_t>(window * d_model)),
        exp_rows_(rows_.size()),
        max_row_(static_cast<std::size_t>(d_model), -std::numeric_limits<float>::infinity()) {
    const int64_t channels_per_head = d_model / n_heads;
    for (int64_t distance = 0; distance < window; ++distance) {
      for (int64_t c = 0; c < d_model; ++c) {
        const float w = pos_bias[(c / channels_per_head) * window + distance];
        rows_[distance * d_model + c] = w;
        max_row_[c] = std::max(max_row_[c], w);
      }
    }
    for (std::size_t i = 0; i < rows_.size(); ++i) {
      exp_rows_[i] = std::exp(rows_[i] - max_row_[i % max_row_.size()]);
    }
  }
  int64_t window() const override { return window_; }
  float scalar(int64_t, int64_t) const override { return 0.0f; }
  const float* per_channel(int64_t distance) const override {
    return rows_.data() + distance * d_model_;
  }
  const float* per_channel_exp(int64_t distance) const override {
    return exp_rows_.data() + distance * d_model_;
  }
  const float* per_channel_max() const override { return max_row_.data(); }

 private:
  int64_t window_, d_model_;
  std::vector<float> rows_, exp_rows_, max_row_;
};

}  // namespace

std::unique_ptr<PositionBias> make_position_bias(const ModelConfig& config,
                                                 const PositionBiasWeights& weights) {
  switch (config.mixer) {
    case Mixer::Simple:
      return std::make_unique<NoBias>();
    case Mixer::Local:
      return std::make_unique<TableBias>(weights.pos_bias, config.max_seq_len, config.window);
    case Mixer::Conv:
      return std::make_unique<RelativeHeadBias>(weights.pos_bias, config.n_heads, config.window,
                                                config.d_model);
    case Mixer::Full:
      if (config.full_bias == FullBias::Factorized) {
        return std::make_unique<FactorizedBias>(weights.pos_u, weights.pos_v, config.max_seq_len,
                                                config.bias_rank);
      }
      return std::make_unique<TableBias>(weights.pos_bias, config.max_seq_len, config.max_seq_len);
    case Mixer::Decay:
      break;  // no pair-wise table: its own op (decay_mixer_op.h)
  }
  throw Error(AFT_ERR_INTERNAL,
              std::string("no position bias for mixer ") + to_string(config.mixer));
}

}  // namespace aft
