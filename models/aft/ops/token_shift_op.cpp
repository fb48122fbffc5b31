// Token shift (docs/aft-math.md, "The decay mixer"): each projection of a decay mixer reads a
// per-channel mix of the token's input and the previous token's. A call's first row takes the
// previous token from the state, which the layer's decay mixer op updates after the projections
// have read it.
#include "decay_mixer_op.h"
#include "engine/runtime/parallel.h"
#include "models/aft/session_state.h"

namespace aft {
namespace {

class TokenShiftOp final : public Op {
 public:
  TokenShiftOp(std::size_t layer, const float* mu) : layer_(layer), mu_(mu) {}

  void run(const ExecContext& ctx, const std::vector<Tensor>& inputs,
           const Tensor& out) const override {
    const Tensor& x = inputs[0];
    parallel_ranges(out.rows, 1, ctx.n_threads, 3 * out.width, [&](std::size_t r0, std::size_t r1) {
      for (std::size_t r = r0; r < r1; ++r) {
        const float* previous =
            ctx.one_sequence() && r > 0
                ? x.row(r - 1)
                : static_cast<SessionState&>(ctx.state_of(r)).layers[layer_].last_input.data();
        const float* now = x.row(r);
        float* y = out.row(r);
        for (std::size_t c = 0; c < out.width; ++c) {
          y[c] = mu_[c] * now[c] + (1.0f - mu_[c]) * previous[c];
        }
      }
    });
  }

 private:
  std::size_t layer_;
  const float* mu_;
};

}  // namespace

std::unique_ptr<Op> make_token_shift_op(std::size_t layer, const float* mu) {
  return std::make_unique<TokenShiftOp>(layer, mu);
}

}  // namespace aft
