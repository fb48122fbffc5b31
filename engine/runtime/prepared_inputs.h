// Which nodes of a call find their first input already prepared (Op::prepares_input): the node
// that ran just before read the same value for the same rows, prepared it the same way, and did
// not write that value's buffer. A batch's query, key and value products read one norm: it is
// quantized once, and the products after the first need no barrier between them.
#pragma once

#include <cstddef>
#include <vector>

#include "buffer_plan.h"
#include "graph.h"

namespace aft {

// ready[i]: whether node i's first input is prepared when it runs (ExecContext::input_prepared).
// node_rows[i]: the rows node i computes in this call (0: it does not run).
void plan_prepared_inputs(const Graph& graph, const BufferPlan& buffers, const ExecContext& ctx,
                          const std::vector<std::size_t>& node_rows, std::vector<bool>& ready);

}  // namespace aft
