// The AFT operator, streaming: each token updates the layer's state and reads its weighted average
// (../docs/architecture.md, "The AFT mixer"). Prefill and decode run this same code, token by
// token, channels split across threads.
#include <algorithm>
#include <cstring>

#include "models/position_bias.h"
#include "ops.h"
#include "parallel.h"
#include "session_state.h"

namespace aft {
namespace {

// Channel ranges per thread start at multiples of this (see parallel.h).
constexpr std::size_t kChannelAlign = 64;

class AftMixerOp final : public Op {
 public:
  AftMixerOp(std::size_t layer, std::size_t key_width, const PositionBias& bias)
      : layer_(layer), key_width_(key_width), bias_(bias), window_(bias.window()) {}

  const char* name() const override { return "aft_mixer"; }

  void run(const ExecContext& ctx, const std::vector<Tensor>& inputs,
           const Tensor& out) const override {
    MixerState& state = ctx.state.layers[layer_];
    reserve_rows(state, ctx.position + static_cast<int64_t>(out.rows), out.width);
    // Per channel and token: one accumulator step (about 10 units) per windowed position.
    const std::size_t cost =
        out.rows * 10 *
        (1 + static_cast<std::size_t>(std::min<int64_t>(window_, ctx.position + out.rows)));
    parallel_ranges(out.width, kChannelAlign, ctx.n_threads, cost,
                    [&](std::size_t begin, std::size_t end) {
                      run_channels(ctx, inputs, out, state, begin, end);
                    });
  }

 private:
  // Full-bias models keep every position; their key/value rows grow with the sequence.
  static void reserve_rows(MixerState& state, int64_t positions, std::size_t width) {
    const std::size_t needed = std::min(state.capacity, static_cast<std::size_t>(positions));
    if (state.rows >= needed) return;
    const std::size_t rows = std::min(state.capacity, std::max(needed, 2 * state.rows));
    state.keys.resize(rows * width);
    state.values.resize(rows * width);
    state.rows = rows;
  }

  void run_channels(const ExecContext& ctx, const std::vector<Tensor>& inputs, const Tensor& out,
                    MixerState& state, std::size_t c0, std::size_t c1) const {
    const kernels::KernelTable& k = ctx.kernels;
    const Tensor& q = inputs[0];
    const Tensor& key = inputs[1];
    const Tensor& value = inputs[2];
    const std::size_t n = c1 - c0;
    const std::size_t d = out.width;
    float* m = state.m.data() + c0;
    float* a = state.a.data() + c0;
    float* b = state.b.data() + c0;
    // The window's sums start from the global state, per token.
    float* wm = ctx.mixer_scratch + c0;
    float* wa = ctx.mixer_scratch + d + c0;
    float* wb = ctx.mixer_scratch + 2 * d + c0;

    for (std::size_t r = 0; r < out.rows; ++r) {
      const int64_t t = ctx.position + static_cast<int64_t>(r);
      if (window_ == 0) {
        k.aft_accumulate_f32(n, m, a, b, key.row(r) + c0, value.row(r) + c0, 0.0f);
        k.aft_output_f32(n, q.row(r) + c0, a, b, out.row(r) + c0);
        continue;
      }
      const std::size_t capacity = state.capacity;
      // The position leaving the window joins the global sums with bias 0; its row is reused.
      const std::size_t slot = static_cast<std::size_t>(t) % capacity;
      if (t >= window_) {
        k.aft_accumulate_f32(n, m, a, b, &state.keys[slot * d + c0], &state.values[slot * d + c0],
                             0.0f);
      }
      store_key(key.row(r), &state.keys[slot * d], c0, c1, d);
      std::memcpy(&state.values[slot * d + c0], value.row(r) + c0, n * sizeof(float));

      std::memcpy(wm, m, n * sizeof(float));
      std::memcpy(wa, a, n * sizeof(float));
      std::memcpy(wb, b, n * sizeof(float));
      for (int64_t tp = std::max<int64_t>(0, t - window_ + 1); tp <= t; ++tp) {
        const std::size_t s = static_cast<std::size_t>(tp) % capacity;
        const float* keys = &state.keys[s * d + c0];
        const float* values = &state.values[s * d + c0];
        if (const float* row = bias_.per_channel(t - tp)) {
          k.aft_accumulate_biased_f32(n, wm, wa, wb, keys, values, row + c0);
        } else {
          k.aft_accumulate_f32(n, wm, wa, wb, keys, values, bias_.scalar(t, tp));
        }
      }
      k.aft_output_f32(n, q.row(r) + c0, wa, wb, out.row(r) + c0);
    }
  }

  // Keys with one channel per head are expanded to the head's channels once, when stored.
  void store_key(const float* key, float* slot, std::size_t c0, std::size_t c1,
                 std::size_t d) const {
    if (key_width_ == d) {
      std::memcpy(slot + c0, key + c0, (c1 - c0) * sizeof(float));
      return;
    }
    const std::size_t channels_per_head = d / key_width_;
    for (std::size_t c = c0; c < c1; ++c) slot[c] = key[c / channels_per_head];
  }

  std::size_t layer_;
  std::size_t key_width_;
  const PositionBias& bias_;
  int64_t window_;
};

}  // namespace

std::unique_ptr<Op> make_aft_mixer_op(std::size_t layer, std::size_t key_width,
                                      const PositionBias& bias) {
  return std::make_unique<AftMixerOp>(layer, key_width, bias);
}

}  // namespace aft
