// The AFT operator, streaming: each token updates the layer's state and reads its weighted average
// (../docs/architecture.md, "The AFT mixer"). Prefill and decode run this same code, token by
// token, channels split across threads; only prompts that every position of sees whole (AFT-full,
// an AFT-local prompt's first window) go to the matrix products of aft_full_prefill.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "aft_full_prefill.h"
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
    // Several tokens that see every earlier position with a bias shared by the channels (AFT-full,
    // or a local model's first window): matrix products instead of one step per pair.
    if (out.rows > 1 && ctx.position + static_cast<int64_t>(out.rows) <= window_ &&
        !bias_.per_channel(0) && key_width_ == out.width) {
      run_full_prefill(ctx, bias_, inputs[0], inputs[1], inputs[2], state, out);
      state.frame_valid = false;  // it stores keys without the window's frame
      return;
    }
    const bool reframe = !state.frame_valid;
    // Per channel and token: one accumulator step (about 10 units) per windowed position.
    const std::size_t cost =
        out.rows * 10 *
        (1 + static_cast<std::size_t>(std::min<int64_t>(window_, ctx.position + out.rows)));
    parallel_ranges(out.width, kChannelAlign, ctx.n_threads, cost,
                    [&](std::size_t begin, std::size_t end) {
                      run_channels(ctx, inputs, out, state, reframe, begin, end);
                    });
    state.frame_valid = true;
  }

 private:
  // Full-bias models keep every position; their key/value rows grow with the sequence.
  static void reserve_rows(MixerState& state, int64_t positions, std::size_t width) {
    const std::size_t needed = std::min(state.capacity, static_cast<std::size_t>(positions));
    if (state.rows >= needed) return;
    const std::size_t rows = std::min(state.capacity, std::max(needed, 2 * state.rows));
    state.keys.resize(rows * width);
    state.values.resize(rows * width);
    state.scaled_keys.resize(rows * width);
    state.rows = rows;
  }

  // Channels [c0, c1) of every row. reframe: rebuild the window's frame before the first token.
  void run_channels(const ExecContext& ctx, const std::vector<Tensor>& inputs, const Tensor& out,
                    MixerState& state, bool reframe, std::size_t c0, std::size_t c1) const {
    const kernels::KernelTable& k = ctx.kernels;
    const Tensor& q = inputs[0];
    const Tensor& key = inputs[1];
    const Tensor& value = inputs[2];
    const std::size_t n = c1 - c0;
    const std::size_t d = out.width;
    float* m = state.m.data() + c0;
    float* a = state.a.data() + c0;
    float* b = state.b.data() + c0;
    // Per token: the window sums, and the largest bias of the window per channel.
    float* bias_max = ctx.mixer_scratch + c0;
    float* sa = ctx.mixer_scratch + d + c0;
    float* sb = ctx.mixer_scratch + 2 * d + c0;

    for (std::size_t r = 0; r < out.rows; ++r) {
      const int64_t t = ctx.position + static_cast<int64_t>(r);
      if (window_ == 0) {
        k.aft_accumulate_f32(n, m, a, b, key.row(r) + c0, value.row(r) + c0, 0.0f);
        k.aft_output_f32(n, q.row(r) + c0, a, b, out.row(r) + c0);
        continue;
      }
      // The position leaving the window joins the global sums with bias 0; its row is reused.
      const std::size_t slot = static_cast<std::size_t>(t) % state.capacity;
      if (t >= window_) {
        k.aft_accumulate_f32(n, m, a, b, &state.keys[slot * d + c0], &state.values[slot * d + c0],
                             0.0f);
      }
      store_key(key.row(r), &state.keys[slot * d], c0, c1, d);
      std::memcpy(&state.values[slot * d + c0], value.row(r) + c0, n * sizeof(float));

      Window& w = window_rows(state, t, c0);
      if (reframe) {
        k.aft_window_reframe_f32(n, w.entries, w.keys.data(), w.scaled.data(),
                                 state.frame.data() + c0);
        reframe = false;
      } else {
        k.aft_window_push_f32(n, w.entries - 1, w.scaled.data(), state.frame.data() + c0,
                              w.keys[w.entries - 1], w.scaled[w.entries - 1]);
      }
      const float* max_row = window_weights(w, t, c0, n, bias_max);
      bool stable = window_sums(k, w, n, sa, sb);
      if (!stable) {
        // Keys far below a stale reference: rebuild the frame from the window's own maximum.
        k.aft_window_reframe_f32(n, w.entries, w.keys.data(), w.scaled.data(),
                                 state.frame.data() + c0);
        stable = window_sums(k, w, n, sa, sb);
      }
      if (stable) {
        k.aft_window_output_f32(n, q.row(r) + c0, m, a, b, state.frame.data() + c0, max_row, sa, sb,
                                out.row(r) + c0);
      } else {
        exact_window_output(k, w, state, t, q.row(r) + c0, n, c0, out.row(r) + c0, sa, sb,
                            bias_max);
      }
    }
  }

  // The window's entries t' = first..t, oldest first, as rows offset to the thread's channels,
  // with their weights. Per thread: the vectors keep their capacity from token to token.
  struct Window {
    std::size_t entries = 0;
    int64_t first = 0;
    std::vector<const float*> keys, values;
    std::vector<float*> scaled;
    std::vector<float> e;              // scalar biases: exp(w - max w) per entry
    std::vector<const float*> e_rows;  // per-channel biases: a row per entry
  };

  Window& window_rows(MixerState& state, int64_t t, std::size_t c0) const {
    thread_local Window w;
    const std::size_t d = state.m.size();
    w.first = std::max<int64_t>(0, t - window_ + 1);
    w.entries = static_cast<std::size_t>(t - w.first + 1);
    w.keys.resize(w.entries);
    w.values.resize(w.entries);
    w.scaled.resize(w.entries);
    for (std::size_t j = 0; j < w.entries; ++j) {
      const std::size_t row = (static_cast<std::size_t>(w.first) + j) % state.capacity * d + c0;
      w.keys[j] = &state.keys[row];
      w.values[j] = &state.values[row];
      w.scaled[j] = &state.scaled_keys[row];
    }
    return w;
  }

  // Fills the window's weights for query position t; returns the row of the largest bias per
  // channel (written to scratch for a bias shared by the channels).
  const float* window_weights(Window& w, int64_t t, std::size_t c0, std::size_t n,
                              float* scratch) const {
    if (const float* max_row = bias_.per_channel_max()) {
      w.e_rows.resize(w.entries);
      for (std::size_t j = 0; j < w.entries; ++j) {
        w.e_rows[j] = bias_.per_channel_exp(t - (w.first + static_cast<int64_t>(j))) + c0;
      }
      return max_row + c0;
    }
    w.e.resize(w.entries);
    float top = -std::numeric_limits<float>::infinity();
    for (std::size_t j = 0; j < w.entries; ++j) {
      w.e[j] = bias_.scalar(t, w.first + static_cast<int64_t>(j));
      top = std::max(top, w.e[j]);
    }
    for (float& e : w.e) e = std::exp(e - top);
    std::fill(scratch, scratch + n, top);
    return scratch;
  }

  bool window_sums(const kernels::KernelTable& k, const Window& w, std::size_t n, float* sa,
                   float* sb) const {
    const float* const* scaled = w.scaled.data();
    if (bias_.per_channel_max()) {
      return k.aft_window_sums_biased_f32(n, w.entries, w.e_rows.data(), scaled, w.values.data(),
                                          sa, sb);
    }
    return k.aft_window_sums_f32(n, w.entries, w.e.data(), scaled, w.values.data(), sa, sb);
  }

  // The reference form, for windows whose frame cannot represent them (keys and biases spread by
  // more than the float range): a copy of (m, a, b) absorbs each entry with an exp of its own.
  void exact_window_output(const kernels::KernelTable& k, const Window& w, const MixerState& state,
                           int64_t t, const float* q, std::size_t n, std::size_t c0, float* y,
                           float* wa, float* wb, float* wm) const {
    std::memcpy(wm, state.m.data() + c0, n * sizeof(float));
    std::memcpy(wa, state.a.data() + c0, n * sizeof(float));
    std::memcpy(wb, state.b.data() + c0, n * sizeof(float));
    for (std::size_t j = 0; j < w.entries; ++j) {
      const int64_t tp = w.first + static_cast<int64_t>(j);
      if (const float* row = bias_.per_channel(t - tp)) {
        k.aft_accumulate_biased_f32(n, wm, wa, wb, w.keys[j], w.values[j], row + c0);
      } else {
        k.aft_accumulate_f32(n, wm, wa, wb, w.keys[j], w.values[j], bias_.scalar(t, tp));
      }
    }
    k.aft_output_f32(n, q, wa, wb, y);
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
