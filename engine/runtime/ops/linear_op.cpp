#include <cstdint>
#include <vector>

#include "engine/runtime/parallel.h"
#include "ops.h"

namespace aft {
namespace {

// Output rows per thread range start at multiples of this (see parallel.h).
constexpr std::size_t kRowAlign = 64;

// A thread's copy of the input rows in 8-bit blocks, for q8_0 weights (in the session's scratch).
struct QuantizedInput {
  std::vector<int8_t> values;
  std::vector<float> scales;
};

class LinearOp final : public Op {
 public:
  LinearOp(std::size_t in_width, std::size_t out_width, kernels::WeightMatrix w, const float* bias,
           kernels::PostOp post, kernels::MatmulPrecision precision)
      : in_width_(in_width),
        out_width_(out_width),
        w_(w),
        bias_(bias),
        post_(post),
        matmul_(in_width, out_width, w, bias, post, kernels::matmul_machine_blocks(), precision) {}

  void run(const ExecContext& ctx, const std::vector<Tensor>& inputs,
           const Tensor& out) const override {
    const Tensor& in = inputs[0];
    const float* residual = inputs.size() > 1 ? inputs[1].data : nullptr;
    if (out.rows != 1 && ctx.one_sequence()) {
      matmul_.run(out.rows, in.data, out.data, ctx.n_threads, residual,
                  ctx.scratch.local<kernels::MatmulScratch>());
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
    const float* bias = bias_ ? bias_ + begin : nullptr;
    float* y = out.data + begin;
    const kernels::KernelTable& k = ctx.kernels;
    switch (w_.type) {
      case kernels::WeightType::F32: {
        const float* w = w_.f32_rows(begin, in_width_);
        if (out.rows == 1) {
          k.gemv_f32(n, in_width_, w, in.data, bias, y);
        } else {
          k.gemv_batch_f32(n, in_width_, w, out.rows, in.data, in_width_, bias, y, out_width_);
        }
        break;
      }
      case kernels::WeightType::BF16: {
        const uint16_t* w = w_.bf16_rows(begin, in_width_);
        if (out.rows == 1) {
          k.gemv_bf16(n, in_width_, w, in.data, bias, y);
        } else {
          k.gemv_batch_bf16(n, in_width_, w, out.rows, in.data, in_width_, bias, y, out_width_);
        }
        break;
      }
      case kernels::WeightType::Q8_0: {
        // Integer dot products need the activations in 8-bit blocks too: each thread quantizes
        // the (short) input rows itself rather than wait for one that does.
        QuantizedInput& x = ctx.scratch.local<QuantizedInput>();
        const std::size_t values = out.rows * in_width_;
        if (x.values.size() < values) x.values.resize(values);
        if (x.scales.size() < values / kernels::kQ8BlockSize) {
          x.scales.resize(values / kernels::kQ8BlockSize);
        }
        const int8_t* xq = x.values.data();
        const float* xd = x.scales.data();
        k.quantize_q8_0(values, in.data, x.values.data(), x.scales.data());
        const int8_t* wq = w_.q8_rows(begin, in_width_);
        const float* wd = w_.q8_scales(begin, in_width_);
        if (out.rows == 1) {
          k.gemv_q8_0(n, in_width_, wq, wd, xq, xd, bias, y);
        } else {
          k.gemv_batch_q8_0(n, in_width_, wq, wd, out.rows, xq, xd, bias, y, out_width_);
        }
        break;
      }
    }
    for (std::size_t r = 0; r < out.rows; ++r) {
      float* y = out.row(r) + begin;
      if (post_ == kernels::PostOp::Relu) ctx.kernels.relu_f32(n, y);
      if (post_ == kernels::PostOp::Gelu) ctx.kernels.gelu_f32(n, y);
      if (post_ == kernels::PostOp::ReluSquared) ctx.kernels.relu_squared_f32(n, y);
      if (residual) ctx.kernels.add_f32(n, residual + r * out_width_ + begin, y);
    }
  }

  std::size_t in_width_, out_width_;
  kernels::WeightMatrix w_;
  const float* bias_;
  kernels::PostOp post_;
  kernels::Matmul matmul_;
};

}  // namespace

std::unique_ptr<Op> make_linear_op(std::size_t in_width, std::size_t out_width,
                                   kernels::WeightMatrix w, const float* bias, kernels::PostOp post,
                                   kernels::MatmulPrecision precision) {
  return std::make_unique<LinearOp>(in_width, out_width, w, bias, post, precision);
}

}  // namespace aft
