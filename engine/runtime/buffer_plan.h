// Assigns every graph value to a buffer so that values whose lifetimes do not overlap share memory.
// A buffer holds max_rows rows of its width; a session allocates them once.
#pragma once

#include <cstddef>
#include <vector>

#include "graph.h"

namespace aft {

struct BufferPlan {
  std::vector<std::size_t> buffer_widths;  // floats per row of each buffer
  std::vector<std::size_t> value_buffer;   // buffer index of each value
};

BufferPlan plan_buffers(const Graph& graph);

}  // namespace aft
