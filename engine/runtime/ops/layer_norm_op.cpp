#include "engine/runtime/parallel.h"
#include "ops.h"

namespace aft {
namespace {

class LayerNormOp final : public Op {
 public:
  LayerNormOp(const float* gamma, const float* beta, float eps)
      : gamma_(gamma), beta_(beta), eps_(eps) {}

  void run(const ExecContext& ctx, const std::vector<Tensor>& inputs,
           const Tensor& out) const override {
    normalize(ctx, inputs[0], out, CallSplit{ctx.n_threads});
  }
  // A batch's rows split among the members as run() splits them (one token's row stays on one).
  void run_in_team(const ExecContext& ctx, const std::vector<Tensor>& inputs, const Tensor& out,
                   Team team) const override {
    normalize(ctx, inputs[0], out, MemberSplit{team});
  }
  bool touches_only_its_tensors(std::size_t) const override { return true; }

 private:
  template <class Split>
  void normalize(const ExecContext& ctx, const Tensor& in, const Tensor& out,
                 const Split& split) const {
    split.ranges(out.rows, 1, 4 * out.width, [&](std::size_t begin, std::size_t end) {
      for (std::size_t r = begin; r < end; ++r) {
        ctx.kernels.layer_norm_f32(out.width, in.row(r), gamma_, beta_, eps_, out.row(r));
      }
    });
  }

  const float* gamma_;
  const float* beta_;
  float eps_;
};

}  // namespace

std::unique_ptr<Op> make_layer_norm_op(const float* gamma, const float* beta, float eps) {
  return std::make_unique<LayerNormOp>(gamma, beta, eps);
}

}  // namespace aft
