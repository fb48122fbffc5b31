#include "executor.h"

#include "kernels/thread_team.h"
#include "prepared_inputs.h"
#include "region_barriers.h"

namespace aft {
namespace {

// The inputs of the node being run: in the session's scratch (per thread), so that a call
// allocates nothing for them once one has run.
struct NodeInputs {
  std::vector<Tensor> tensors;
};

// What one node reads and writes for a call of `rows` token rows and `output_rows` output rows.
class NodeTensors {
 public:
  NodeTensors(const Graph& graph, const BufferPlan& plan, const std::vector<float*>& buffers,
              std::size_t rows, std::size_t output_rows)
      : values_(graph.values()),
        plan_(plan),
        buffers_(buffers),
        rows_(rows),
        output_rows_(output_rows) {}

  std::size_t rows_of(ValueId id) const {
    return values_[id].rows == RowSet::Tokens ? rows_ : output_rows_;
  }

  Tensor value(ValueId id, std::size_t rows) const {
    // An output-rows node reads the last rows of a token-rows input.
    const std::size_t skipped = rows_of(id) - rows;
    return Tensor{buffers_[plan_.value_buffer[id]] + skipped * values_[id].width, rows,
                  values_[id].width};
  }

  // The node's inputs into `inputs`; returns its output (0 rows: the node does not run).
  Tensor gather(const Node& node, std::vector<Tensor>& inputs) const {
    const std::size_t out_rows = rows_of(node.output);
    inputs.clear();
    for (ValueId id : node.inputs) inputs.push_back(value(id, out_rows));
    return value(node.output, out_rows);
  }

 private:
  const std::vector<Value>& values_;
  const BufferPlan& plan_;
  const std::vector<float*>& buffers_;
  std::size_t rows_, output_rows_;
};

// What a call decides before it runs its nodes: the rows each node computes, which nodes find their
// input prepared, and (in one region) where the members wait for each other. In the calling
// thread's scratch, read by every member.
struct CallPlan {
  std::vector<std::size_t> node_rows;
  std::vector<bool> prepared;
  RegionBarriers barriers;
};

// The call's CallPlan, but for the barriers; for a region, each op's prepare() too.
CallPlan& plan_call(const Graph& graph, const BufferPlan& plan, const NodeTensors& tensors,
                    const ExecContext& ctx, bool region) {
  std::vector<Tensor>& inputs = ctx.scratch.local<NodeInputs>().tensors;
  CallPlan& call = ctx.scratch.local<CallPlan>();
  call.node_rows.clear();
  for (const Node& node : graph.nodes()) {
    const Tensor out = tensors.gather(node, inputs);
    call.node_rows.push_back(out.rows);
    if (out.rows > 0 && region) node.op->prepare(ctx, out.rows);
  }
  plan_prepared_inputs(graph, plan, ctx, call.node_rows, call.prepared);
  return call;
}

// ctx for node i of the call.
ExecContext node_context(const ExecContext& ctx, const CallPlan& call, std::size_t i) {
  ExecContext node_ctx = ctx;
  node_ctx.input_prepared = call.prepared[i];
  return node_ctx;
}

// One run of the team for the whole call (a decoded token, or a batch's): each op splits its work
// over the team, a barrier between ops where one reads what another wrote (region_barriers.h),
// instead of a run per op. An exception stops no thread early (every thread reaches every
// barrier); the first one is rethrown after the region.
void execute_in_one_region(const Graph& graph, const BufferPlan& plan, const NodeTensors& tensors,
                           const ExecContext& ctx) {
  CallPlan& region = plan_call(graph, plan, tensors, ctx, true);
  region.barriers.plan(graph, plan, region.node_rows, region.prepared);
  kernels::FirstException error;
  kernels::ThreadTeam& threads = kernels::ThreadTeam::of_this_thread();
  threads.run(ctx.n_threads, [&](Team team) {
    const std::vector<Node>& nodes = graph.nodes();
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (region.node_rows[i] == 0) continue;
      error.run([&] {
        std::vector<Tensor>& node_inputs = ctx.scratch.local<NodeInputs>().tensors;
        const Tensor out = tensors.gather(nodes[i], node_inputs);
        nodes[i].op->run_in_team(node_context(ctx, region, i), node_inputs, out, team);
      });
      if (region.barriers.after(i)) threads.barrier(team);
    }
  });
  error.rethrow();
}

}  // namespace

Tensor execute(const Graph& graph, const BufferPlan& plan, const std::vector<float*>& buffers,
               const ExecContext& ctx, std::size_t rows, std::size_t output_rows) {
  const NodeTensors tensors(graph, plan, buffers, rows, output_rows);
  if (ctx.one_region && ctx.n_threads > 1) {
    execute_in_one_region(graph, plan, tensors, ctx);
  } else {
    const CallPlan& call = plan_call(graph, plan, tensors, ctx, false);
    std::vector<Tensor>& inputs = ctx.scratch.local<NodeInputs>().tensors;
    const std::vector<Node>& nodes = graph.nodes();
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (call.node_rows[i] == 0) continue;
      const Tensor out = tensors.gather(nodes[i], inputs);
      nodes[i].op->run(node_context(ctx, call, i), inputs, out);
    }
  }
  const ValueId out = graph.output();
  return tensors.value(out, tensors.rows_of(out));
}

}  // namespace aft
