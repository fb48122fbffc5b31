// Token shift (docs/aft-math.md, "The decay mixer"): each projection of a decay mixer (and of
// RWKV-4's channel mixing) reads a per-channel mix of the token's input and the previous token's.
// A call's first row takes the previous token from the state, which is updated after every
// projection has read it: by the layer's decay mixer op, or by the feed-forward's last shift.
#include <algorithm>

#include "decay_mixer_op.h"
#include "engine/runtime/parallel.h"
#include "models/aft/session_state.h"

namespace aft {
namespace {

class TokenShiftOp final : public Op {
 public:
  TokenShiftOp(std::size_t layer, ShiftedInput input, const float* mu, bool remembers)
      : layer_(layer), input_(input), mu_(mu), remembers_(remembers) {}

  void run(const ExecContext& ctx, const std::vector<Tensor>& inputs,
           const Tensor& out) const override {
    shift(ctx, inputs[0], out, CallSplit{ctx.n_threads});
  }
  // A batch's rows split among the members as run() splits them (one token's row stays on one).
  void run_in_team(const ExecContext& ctx, const std::vector<Tensor>& inputs, const Tensor& out,
                   Team team) const override {
    shift(ctx, inputs[0], out, MemberSplit{team});
  }

 private:
  template <class Split>
  void shift(const ExecContext& ctx, const Tensor& x, const Tensor& out, const Split& split) const {
    split.ranges(out.rows, 1, 3 * out.width, [&](std::size_t r0, std::size_t r1) {
      for (std::size_t r = r0; r < r1; ++r) {
        const float* previous = ctx.one_sequence() && r > 0 ? x.row(r - 1) : remembered(ctx, r);
        const float* now = x.row(r);
        float* y = out.row(r);
        for (std::size_t c = 0; c < out.width; ++c) {
          y[c] = mu_[c] * now[c] + (1.0f - mu_[c]) * previous[c];
        }
        // A batch's row is its sequence's only token: read above, replaced here.
        if (remembers_ && !ctx.one_sequence()) std::copy_n(now, out.width, remembered(ctx, r));
      }
      // One sequence's rows read the remembered token in row 0 only, which the first range holds:
      // it replaces it once done, whoever computes the other rows.
      if (remembers_ && ctx.one_sequence() && r0 == 0) {
        std::copy_n(x.row(out.rows - 1), out.width, remembered(ctx, 0));
      }
    });
  }

  float* remembered(const ExecContext& ctx, std::size_t row) const {
    MixerState& layer = layer_state(ctx, row, layer_);
    return (input_ == ShiftedInput::Mixer ? layer.last_input : layer.ffn_last_input).data();
  }

  std::size_t layer_;
  ShiftedInput input_;
  const float* mu_;
  bool remembers_;
};

}  // namespace

std::unique_ptr<Op> make_token_shift_op(std::size_t layer, ShiftedInput input, const float* mu,
                                        bool remembers) {
  return std::make_unique<TokenShiftOp>(layer, input, mu, remembers);
}

}  // namespace aft
