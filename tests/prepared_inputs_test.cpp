// Which nodes reuse the input the node before prepared (engine/runtime/prepared_inputs.h): only
// the next node that runs, reading the same value for the same rows, prepared the same way, when
// the preparer did not write that value; no barrier between the two in one region; and a graph run
// so, on 1 to 3 threads, gets every value right (a wrong reuse reads another node's preparation,
// and under ThreadSanitizer a missing barrier is a reported race).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/runtime/buffer_plan.h"
#include "engine/runtime/executor.h"
#include "engine/runtime/parallel.h"
#include "engine/runtime/prepared_inputs.h"
#include "engine/runtime/region_barriers.h"
#include "executor_test_ops.h"
#include "kernels/kernels.h"

namespace aft {
namespace {

constexpr std::size_t kWidth = 4096;

// What PrepareOp prepares, in the scratch its threads share.
struct Doubled {
  std::vector<float> values;
};

// 2 x its input + offset: the doubled input prepared first into the shared scratch (each member a
// range of rows, then a sync), unless the node before prepared it (ExecContext::input_prepared),
// then each member a range of columns of the output, as LinearOp's products.
class PrepareOp final : public Op {
 public:
  PrepareOp(PreparedInput kind, float offset) : kind_(kind), offset_(offset) {}

  void run(const ExecContext& ctx, const std::vector<Tensor>& inputs,
           const Tensor& out) const override {
    prepare(ctx, out.rows);
    compute(ctx, inputs[0], out, CallSplit{1});
  }
  void prepare(const ExecContext& ctx, std::size_t rows) const override {
    std::vector<float>& values = ctx.scratch.shared<Doubled>().values;
    if (values.size() < rows * kWidth) values.resize(rows * kWidth);
  }
  void run_in_team(const ExecContext& ctx, const std::vector<Tensor>& inputs, const Tensor& out,
                   Team team) const override {
    compute(ctx, inputs[0], out, MemberSplit{team});
  }
  PreparedInput prepares_input(const ExecContext&, std::size_t) const override { return kind_; }

 private:
  template <class Split>
  void compute(const ExecContext& ctx, const Tensor& in, const Tensor& out,
               const Split& split) const {
    float* doubled = ctx.scratch.shared<Doubled>().values.data();
    if (!ctx.input_prepared) {
      split.ranges(out.rows, 1, kMinWorkPerThread, [&](std::size_t begin, std::size_t end) {
        for (std::size_t r = begin; r < end; ++r) {
          for (std::size_t c = 0; c < kWidth; ++c) doubled[r * kWidth + c] = 2.0f * in.row(r)[c];
        }
      });
      split.sync();
    }
    split.ranges(kWidth, 1, kMinWorkPerThread, [&](std::size_t begin, std::size_t end) {
      for (std::size_t r = 0; r < out.rows; ++r) {
        for (std::size_t c = begin; c < end; ++c) out.row(r)[c] = doubled[r * kWidth + c] + offset_;
      }
    });
  }

  PreparedInput kind_;
  float offset_;
};

// source; p = 2 source + 1, q = 2 source + 2 (the same preparation as p's, reused), r = 2 p + 3,
// s = 2 p + 4 (prepared as bf16, unlike r); sum(p, q, r, s).
struct Preparers {
  Graph graph;
  ValueId source, p, q, r, s, sum;
  Preparers() {
    source = graph.add_node(std::make_unique<SourceOp>(), {}, "source", kWidth, RowSet::Tokens);
    p = add(PreparedInput::Q8_0, 1.0f, source, "p");
    q = add(PreparedInput::Q8_0, 2.0f, source, "q");
    r = add(PreparedInput::Q8_0, 3.0f, p, "r");
    s = add(PreparedInput::Bf16, 4.0f, p, "s");
    sum = graph.add_node(std::make_unique<SumOp>(), {p, q, r, s}, "sum", kWidth, RowSet::Tokens);
    graph.set_output(sum);
  }
  ValueId add(PreparedInput kind, float offset, ValueId input, const char* name) {
    return graph.add_node(std::make_unique<PrepareOp>(kind, offset), {input}, name, kWidth,
                          RowSet::Tokens);
  }
};

struct Call {
  SequenceState state;
  Sequence sequence{&state, nullptr};
  Scratch scratch;
  ExecContext ctx;
  explicit Call(int threads)
      : ctx{kernels::active_kernels(), threads, nullptr, &sequence, 1, scratch} {
    scratch.begin_call(threads);
  }
};

std::vector<bool> prepared_of(const Graph& graph, const BufferPlan& plan,
                              const std::vector<std::size_t>& node_rows) {
  Call call(1);
  std::vector<bool> ready;
  plan_prepared_inputs(graph, plan, call.ctx, node_rows, ready);
  return ready;
}

TEST(PreparedInputs, ReusedOnlyByTheNextNodeOfTheSameInputRowsAndKind) {
  const Preparers g;
  const BufferPlan plan = plan_buffers(g.graph);
  // q after p: the same input and kind. r reads p, s prepares bf16.
  EXPECT_EQ(prepared_of(g.graph, plan, {1, 1, 1, 1, 1, 1}),
            (std::vector<bool>{false, false, true, false, false, false}));
  // q computes other rows than p.
  EXPECT_EQ(prepared_of(g.graph, plan, {2, 2, 1, 2, 2, 2}), (std::vector<bool>(6, false)));
  // q does not run: r follows p, whose input it does not read.
  EXPECT_EQ(prepared_of(g.graph, plan, {1, 1, 0, 1, 1, 1}), (std::vector<bool>(6, false)));
  // A plan (made by hand) where p writes the buffer of the source it read.
  BufferPlan overwriting = plan;
  overwriting.value_buffer[g.p] = overwriting.value_buffer[g.source];
  EXPECT_EQ(prepared_of(g.graph, overwriting, {1, 1, 1, 1, 1, 1}), (std::vector<bool>(6, false)));
}

TEST(PreparedInputs, NoBarrierBetweenThePreparerAndTheReuser) {
  const Preparers g;
  const BufferPlan plan = plan_buffers(g.graph);
  const std::vector<std::size_t> rows(6, 1);
  RegionBarriers barriers;
  barriers.plan(g.graph, plan, rows, prepared_of(g.graph, plan, rows));
  std::vector<bool> after;
  for (std::size_t i = 0; i < g.graph.nodes().size(); ++i) after.push_back(barriers.after(i));
  // r prepares again what q reads: a barrier before it.
  EXPECT_EQ(after, (std::vector<bool>{true, false, true, true, true, true}));
}

TEST(PreparedInputs, EveryValueRightOnOneToThreeThreads) {
  const Preparers g;
  const BufferPlan plan = plan_buffers(g.graph);
  constexpr std::size_t kRows = 3;
  for (int threads : {1, 2, 3}) {
    for (bool one_region : {false, true}) {
      std::vector<std::vector<float>> memory;
      std::vector<float*> buffers;
      for (std::size_t width : plan.buffer_widths) {
        memory.emplace_back(kRows * width, -1.0f);
        buffers.push_back(memory.back().data());
      }
      Call call(threads);
      call.ctx.one_region = one_region;
      for (int repeat = 0; repeat < 10; ++repeat) {
        const Tensor out = execute(g.graph, plan, buffers, call.ctx, kRows, kRows);
        ASSERT_EQ(out.rows, kRows);
        for (std::size_t r = 0; r < kRows; ++r) {
          for (std::size_t col = 0; col < kWidth; ++col) {
            const float source = r + col / 1000.0f;
            const float p = 2.0f * source + 1.0f;
            const float expected =
                p + (2.0f * source + 2.0f) + (2.0f * p + 3.0f) + (2.0f * p + 4.0f);
            ASSERT_EQ(out.row(r)[col], expected) << threads << " threads, one region " << one_region
                                                 << ", row " << r << ", column " << col;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace aft
