#include "ops.h"
#include "parallel.h"

namespace aft {
namespace {

// Output rows per thread range start at multiples of this (see parallel.h).
constexpr std::size_t kRowAlign = 64;

class LinearOp final : public Op {
 public:
  LinearOp(std::size_t in_width, std::size_t out_width, const float* w, const float* bias,
           kernels::PostOp post)
      : in_width_(in_width),
        out_width_(out_width),
        w_(w),
        bias_(bias),
        post_(post),
        matmul_(in_width, out_width, w, bias, post) {}

  const char* name() const override { return "linear"; }

  void run(const ExecContext& ctx, const std::vector<Tensor>& inputs,
           const Tensor& out) const override {
    const Tensor& in = inputs[0];
    const float* residual = inputs.size() > 1 ? inputs[1].data : nullptr;
    if (out.rows != 1 && !ctx.batch_states) {
      matmul_.run(out.rows, in.data, out.data, ctx.n_threads, residual);
      return;
    }
    // One token per sequence: matrix-vector products, bound by reading the weights once (for
    // every sequence of a batch), and the bits of a sequence decoded alone.
    parallel_ranges(
        out_width_, kRowAlign, ctx.n_threads, in_width_ * out.rows,
        [&](std::size_t begin, std::size_t end) { gemv_rows(ctx, in, residual, out, begin, end); });
  }

  void run_in_team(const ExecContext& ctx, const std::vector<Tensor>& inputs, const Tensor& out,
                   Team team) const override {
    if (out.rows != 1) {
      Op::run_in_team(ctx, inputs, out, team);
      return;
    }
    const float* residual = inputs.size() > 1 ? inputs[1].data : nullptr;
    team_ranges(out_width_, kRowAlign, team, in_width_, [&](std::size_t begin, std::size_t end) {
      gemv_rows(ctx, inputs[0], residual, out, begin, end);
    });
  }

 private:
  // Output columns [begin, end) of every row, each row alone: bias, activation and residual while
  // they are cached.
  void gemv_rows(const ExecContext& ctx, const Tensor& in, const float* residual, const Tensor& out,
                 std::size_t begin, std::size_t end) const {
    const std::size_t n = end - begin;
    const float* w = w_ + begin * in_width_;
    const float* bias = bias_ ? bias_ + begin : nullptr;
    if (out.rows == 1) {
      ctx.kernels.gemv_f32(n, in_width_, w, in.data, bias, out.data + begin);
    } else {
      ctx.kernels.gemv_batch_f32(n, in_width_, w, out.rows, in.data, in_width_, bias,
                                 out.data + begin, out_width_);
    }
    for (std::size_t r = 0; r < out.rows; ++r) {
      float* y = out.row(r) + begin;
      if (post_ == kernels::PostOp::Relu) ctx.kernels.relu_f32(n, y);
      if (post_ == kernels::PostOp::Gelu) ctx.kernels.gelu_f32(n, y);
      if (residual) ctx.kernels.add_f32(n, residual + r * out_width_ + begin, y);
    }
  }

  std::size_t in_width_, out_width_;
  const float* w_;
  const float* bias_;
  kernels::PostOp post_;
  kernels::Matmul matmul_;
};

}  // namespace

std::unique_ptr<Op> make_linear_op(std::size_t in_width, std::size_t out_width, const float* w,
                                   const float* bias, kernels::PostOp post) {
  return std::make_unique<LinearOp>(in_width, out_width, w, bias, post);
}

}  // namespace aft
