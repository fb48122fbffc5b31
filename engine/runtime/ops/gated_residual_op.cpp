#include <algorithm>

#include "engine/runtime/parallel.h"
#include "ops.h"

namespace aft {
namespace {

class GatedResidualOp final : public Op {
 public:
  void run(const ExecContext& ctx, const std::vector<Tensor>& inputs,
           const Tensor& out) const override {
    add(ctx, inputs, out, CallSplit{ctx.n_threads});
  }
  // A batch's rows split among the members as run() splits them.
  void run_in_team(const ExecContext& ctx, const std::vector<Tensor>& inputs, const Tensor& out,
                   Team team) const override {
    add(ctx, inputs, out, MemberSplit{team});
  }
  bool touches_only_its_tensors(std::size_t) const override { return true; }

 private:
  template <class Split>
  void add(const ExecContext& ctx, const std::vector<Tensor>& inputs, const Tensor& out,
           const Split& split) const {
    const Tensor& gate = inputs[0];
    const Tensor& y = inputs[1];
    const Tensor& x = inputs[2];
    split.ranges(out.rows, 1, 4 * out.width, [&](std::size_t r0, std::size_t r1) {
      for (std::size_t r = r0; r < r1; ++r) {
        std::copy_n(x.row(r), out.width, out.row(r));
        ctx.kernels.gated_add_f32(out.width, gate.row(r), y.row(r), out.row(r));
      }
    });
  }
};

}  // namespace

std::unique_ptr<Op> make_gated_residual_op() { return std::make_unique<GatedResidualOp>(); }

}  // namespace aft
