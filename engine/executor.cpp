#include "executor.h"

namespace aft {

Tensor execute(const Graph& graph, const BufferPlan& plan, const std::vector<float*>& buffers,
               const ExecContext& ctx, std::size_t rows, std::size_t output_rows) {
  const auto& values = graph.values();
  auto rows_of = [&](ValueId id) { return values[id].rows == RowSet::Tokens ? rows : output_rows; };
  std::vector<Tensor> inputs;
  for (const Node& node : graph.nodes()) {
    const std::size_t out_rows = rows_of(node.output);
    if (out_rows == 0) continue;
    inputs.clear();
    for (ValueId id : node.inputs) {
      // An output-rows node reads the last out_rows rows of a token-rows input.
      const std::size_t skipped = rows_of(id) - out_rows;
      inputs.push_back(Tensor{buffers[plan.value_buffer[id]] + skipped * values[id].width, out_rows,
                              values[id].width});
    }
    node.op->run(
        ctx, inputs,
        Tensor{buffers[plan.value_buffer[node.output]], out_rows, values[node.output].width});
  }
  const ValueId out = graph.output();
  return Tensor{buffers[plan.value_buffer[out]], rows_of(out), values[out].width};
}

}  // namespace aft
