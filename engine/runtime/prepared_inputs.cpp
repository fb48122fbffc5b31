#include "prepared_inputs.h"

namespace aft {

void plan_prepared_inputs(const Graph& graph, const BufferPlan& buffers, const ExecContext& ctx,
                          const std::vector<std::size_t>& node_rows, std::vector<bool>& ready) {
  const std::vector<Node>& nodes = graph.nodes();
  ready.assign(nodes.size(), false);
  std::size_t previous = nodes.size();  // the last node that runs so far
  PreparedInput previous_kind = PreparedInput::None;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (node_rows[i] == 0) continue;
    const Node& node = nodes[i];
    const PreparedInput kind =
        node.inputs.empty() ? PreparedInput::None : node.op->prepares_input(ctx, node_rows[i]);
    if (kind != PreparedInput::None && kind == previous_kind &&
        node_rows[previous] == node_rows[i]) {
      const Node& before = nodes[previous];
      ready[i] = before.inputs[0] == node.inputs[0] &&
                 buffers.value_buffer[before.output] != buffers.value_buffer[node.inputs[0]];
    }
    previous = i;
    previous_kind = kind;
  }
}

}  // namespace aft
