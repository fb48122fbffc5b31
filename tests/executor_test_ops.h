// Ops for tests of the executor (region_barriers_test, prepared_inputs_test): values whose every
// element a test can compute.
#pragma once

#include <vector>

#include "engine/runtime/graph.h"

namespace aft {

// Row r, column c: r + c / 1000. Touches state in the sense of the executor (the default: not
// only its tensors), so a barrier follows it.
class SourceOp final : public Op {
 public:
  void run(const ExecContext&, const std::vector<Tensor>&, const Tensor& out) const override {
    for (std::size_t r = 0; r < out.rows; ++r) {
      for (std::size_t c = 0; c < out.width; ++c) out.row(r)[c] = r + c / 1000.0f;
    }
  }
};

// The sum of its inputs, in their order, on one thread (Op::run_in_team's default).
class SumOp final : public Op {
 public:
  void run(const ExecContext&, const std::vector<Tensor>& inputs,
           const Tensor& out) const override {
    for (std::size_t r = 0; r < out.rows; ++r) {
      for (std::size_t c = 0; c < out.width; ++c) {
        float sum = 0;
        for (const Tensor& in : inputs) sum += in.row(r)[c];
        out.row(r)[c] = sum;
      }
    }
  }
};

}  // namespace aft
