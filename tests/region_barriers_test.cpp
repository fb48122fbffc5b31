// Where a call in one parallel region waits (engine/runtime/region_barriers.h): no barrier between
// neighbouring nodes that touch only their own tensors and do not read what the other writes, one
// everywhere else; and a graph run so, on 2 and 3 threads, gets every value right (under
// ThreadSanitizer a missing barrier is a reported race).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/runtime/buffer_plan.h"
#include "engine/runtime/executor.h"
#include "engine/runtime/parallel.h"
#include "engine/runtime/region_barriers.h"
#include "executor_test_ops.h"
#include "kernels/kernels.h"

namespace aft {
namespace {

// factor x its input, each member a range of columns.
class ScaleOp final : public Op {
 public:
  explicit ScaleOp(float factor) : factor_(factor) {}
  void run(const ExecContext&, const std::vector<Tensor>& inputs,
           const Tensor& out) const override {
    scale(inputs[0], out, 0, out.width);
  }
  void run_in_team(const ExecContext&, const std::vector<Tensor>& inputs, const Tensor& out,
                   Team team) const override {
    // A cost that splits the columns over every member.
    team_ranges(out.width, 1, team, kMinWorkPerThread,
                [&](std::size_t begin, std::size_t end) { scale(inputs[0], out, begin, end); });
  }
  bool touches_only_its_tensors(std::size_t) const override { return true; }

 private:
  void scale(const Tensor& in, const Tensor& out, std::size_t begin, std::size_t end) const {
    for (std::size_t r = 0; r < out.rows; ++r) {
      for (std::size_t c = begin; c < end; ++c) out.row(r)[c] = factor_ * in.row(r)[c];
    }
  }
  float factor_;
};

constexpr std::size_t kWidth = 4096;

// source; a = 2 source; b = 3 source; c = 5 a; sum(a, b, c): no barrier between a and b only.
struct ScaledSums {
  Graph graph;
  ValueId source, a, b, c, sum;
  ScaledSums() {
    source = graph.add_node(std::make_unique<SourceOp>(), {}, "source", kWidth, RowSet::Tokens);
    a = graph.add_node(std::make_unique<ScaleOp>(2.0f), {source}, "a", kWidth, RowSet::Tokens);
    b = graph.add_node(std::make_unique<ScaleOp>(3.0f), {source}, "b", kWidth, RowSet::Tokens);
    c = graph.add_node(std::make_unique<ScaleOp>(5.0f), {a}, "c", kWidth, RowSet::Tokens);
    sum = graph.add_node(std::make_unique<SumOp>(), {a, b, c}, "sum", kWidth, RowSet::Tokens);
    graph.set_output(sum);
  }
};

std::vector<bool> barriers_of(const Graph& graph, const BufferPlan& plan,
                              const std::vector<std::size_t>& node_rows) {
  RegionBarriers barriers;
  barriers.plan(graph, plan, node_rows, std::vector<bool>(node_rows.size(), false));
  std::vector<bool> after;
  for (std::size_t i = 0; i < graph.nodes().size(); ++i) after.push_back(barriers.after(i));
  return after;
}

TEST(RegionBarriers, LeftOutOnlyBetweenNodesThatShareNothingWritten) {
  const ScaledSums g;
  const BufferPlan plan = plan_buffers(g.graph);
  const std::vector<bool> expected = {true, false, true, true, true};
  EXPECT_EQ(barriers_of(g.graph, plan, {1, 1, 1, 1, 1}), expected);
  // b does not run: c reads what a wrote.
  EXPECT_EQ(barriers_of(g.graph, plan, {1, 1, 0, 1, 1}),
            (std::vector<bool>{true, true, false, true, true}));
  // sum does not run: c is the last node that runs.
  EXPECT_EQ(barriers_of(g.graph, plan, {1, 1, 1, 1, 0}),
            (std::vector<bool>{true, false, true, true, false}));
}

TEST(RegionBarriers, PlannedAgainForOtherRows) {
  const ScaledSums g;
  const BufferPlan plan = plan_buffers(g.graph);
  RegionBarriers barriers;  // one object, as a session's scratch keeps it from call to call
  for (const std::vector<std::size_t>& rows :
       {std::vector<std::size_t>{1, 1, 1, 1, 1}, {1, 1, 0, 1, 1}, {1, 1, 1, 1, 1}}) {
    barriers.plan(g.graph, plan, rows, std::vector<bool>(rows.size(), false));
    EXPECT_EQ(barriers.after(g.a), rows[g.b] == 0);
  }
  // The same rows of another graph's buffers.
  BufferPlan other = plan;
  other.value_buffer[g.b] = other.value_buffer[g.a];
  barriers.plan(g.graph, other, {1, 1, 1, 1, 1}, std::vector<bool>(5, false));
  EXPECT_TRUE(barriers.after(g.a));
}

TEST(RegionBarriers, KeptBeforeANodeThatOverwritesABufferReadSinceTheLast) {
  const ScaledSums g;
  // A plan (made by hand) that gives b the source's buffer: b would overwrite what a reads.
  BufferPlan plan = plan_buffers(g.graph);
  plan.value_buffer[g.b] = plan.value_buffer[g.source];
  EXPECT_TRUE(barriers_of(g.graph, plan, {1, 1, 1, 1, 1})[g.a]);
  // ... or what a writes.
  plan = plan_buffers(g.graph);
  plan.value_buffer[g.b] = plan.value_buffer[g.a];
  EXPECT_TRUE(barriers_of(g.graph, plan, {1, 1, 1, 1, 1})[g.a]);
}

TEST(RegionBarriers, ARegionWithoutThemComputesEveryValue) {
  const ScaledSums g;
  const BufferPlan plan = plan_buffers(g.graph);
  ASSERT_NE(plan.value_buffer[g.a], plan.value_buffer[g.b]);
  constexpr std::size_t kRows = 3;
  for (int threads : {2, 3}) {
    std::vector<std::vector<float>> memory;
    std::vector<float*> buffers;
    for (std::size_t width : plan.buffer_widths) {
      memory.emplace_back(kRows * width, -1.0f);
      buffers.push_back(memory.back().data());
    }
    SequenceState state;
    const Sequence sequence{&state, nullptr};
    Scratch scratch;
    scratch.begin_call(threads);
    ExecContext ctx{kernels::active_kernels(), threads, nullptr, &sequence, 1, scratch};
    ctx.one_region = true;
    for (int repeat = 0; repeat < 20; ++repeat) {
      const Tensor out = execute(g.graph, plan, buffers, ctx, kRows, kRows);
      ASSERT_EQ(out.rows, kRows);
      for (std::size_t r = 0; r < kRows; ++r) {
        for (std::size_t col = 0; col < kWidth; ++col) {
          const float source = r + col / 1000.0f;
          const float expected = 2.0f * source + 3.0f * source + 5.0f * (2.0f * source);
          ASSERT_EQ(out.row(r)[col], expected)
              << threads << " threads, row " << r << ", column " << col;
        }
      }
    }
  }
}

}  // namespace
}  // namespace aft
