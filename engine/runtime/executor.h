// Runs a model's graph over one chunk of tokens.
#pragma once

#include <cstddef>
#include <vector>

#include "buffer_plan.h"
#include "graph.h"

namespace aft {

// buffers[i] holds at least rows x plan.buffer_widths[i] floats. output_rows: how many of the last
// rows need the output (0 skips every node that only feeds the output). Returns the output's rows.
// With ctx.one_region (and more than one thread) every op runs in one parallel region
// (Op::run_in_team); otherwise each op opens its own where it splits work.
Tensor execute(const Graph& graph, const BufferPlan& plan, const std::vector<float*>& buffers,
               const ExecContext& ctx, std::size_t rows, std::size_t output_rows);

}  // namespace aft
