#include <cmath>
#include <vector>

#include "engine/runtime/parallel.h"
#include "ops.h"

namespace aft {
namespace {

class EmbeddingOp final : public Op {
 public:
  EmbeddingOp(const float* table, std::size_t width, float scale, PosEncoding positions,
              const float* learned_positions)
      : table_(table),
        width_(width),
        scale_(scale),
        positions_(positions),
        learned_positions_(learned_positions) {
    if (positions == PosEncoding::Sinusoidal) {
      const double d = static_cast<double>(width_);
      for (std::size_t c = 0; c < width_; c += 2) {
        frequencies_.push_back(std::exp(-static_cast<double>(c) * std::log(10000.0) / d));
      }
    }
  }

  void run(const ExecContext& ctx, const std::vector<Tensor>&, const Tensor& out) const override {
    embed(ctx, out, CallSplit{ctx.n_threads});
  }
  void run_in_team(const ExecContext& ctx, const std::vector<Tensor>&, const Tensor& out,
                   Team team) const override {
    embed(ctx, out, MemberSplit{team});
  }

 private:
  template <class Split>
  void embed(const ExecContext& ctx, const Tensor& out, const Split& split) const {
    // Per row: a copy, and a sine and a cosine per channel pair for sinusoidal positions.
    const std::size_t cost = positions_ == PosEncoding::Sinusoidal ? 20 * width_ : width_;
    split.ranges(out.rows, 1, cost, [&](std::size_t r0, std::size_t r1) {
      for (std::size_t r = r0; r < r1; ++r) embed_row(ctx, r, out);
    });
  }

  void embed_row(const ExecContext& ctx, std::size_t r, const Tensor& out) const {
    const float* embedding = table_ + static_cast<std::size_t>(ctx.tokens[r]) * width_;
    float* y = out.row(r);
    for (std::size_t c = 0; c < width_; ++c) y[c] = embedding[c] * scale_;
    const int64_t position = ctx.position_of(r);
    if (positions_ == PosEncoding::Learned) {
      ctx.kernels.add_f32(width_, learned_positions_ + position * width_, y);
    } else if (positions_ == PosEncoding::Sinusoidal) {
      add_sinusoid(position, y);
    }
  }

  // Computed in double, as the reference does, so that large positions keep their precision.
  void add_sinusoid(int64_t position, float* y) const {
    for (std::size_t c = 0; c < width_; c += 2) {
      const double angle = static_cast<double>(position) * frequencies_[c / 2];
      y[c] += static_cast<float>(std::sin(angle));
      if (c + 1 < width_) y[c + 1] += static_cast<float>(std::cos(angle));
    }
  }

  const float* table_;
  std::size_t width_;
  float scale_;
  PosEncoding positions_;
  const float* learned_positions_;
  std::vector<double> frequencies_;  // of channel pairs (c, c + 1)
};

}  // namespace

std::unique_ptr<Op> make_embedding_op(const float* table, std::size_t width, float scale,
                                      PosEncoding positions, const float* learned_positions) {
  return std::make_unique<EmbeddingOp>(table, width, scale, positions, learned_positions);
}

}  // namespace aft
