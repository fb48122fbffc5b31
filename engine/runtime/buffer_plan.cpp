#include "buffer_plan.h"

#include <limits>

namespace aft {

BufferPlan plan_buffers(const Graph& graph) {
  const auto& values = graph.values();
  const auto& nodes = graph.nodes();

  // The last node that reads each value; the graph's output lives to the end.
  constexpr std::size_t kForever = std::numeric_limits<std::size_t>::max();
  std::vector<std::size_t> last_use(values.size(), 0);
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    last_use[nodes[n].output] = n;
    for (ValueId input : nodes[n].inputs) last_use[input] = n;
  }
  last_use[graph.output()] = kForever;

  BufferPlan plan;
  plan.value_buffer.assign(values.size(), 0);
  std::vector<std::size_t> free_buffers;
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    const std::size_t width = values[nodes[n].output].width;
    // Best fit among free buffers; otherwise widen the largest free one, or add a buffer.
    std::size_t best = kForever;
    std::size_t largest = kForever;
    for (std::size_t i = 0; i < free_buffers.size(); ++i) {
      const std::size_t w = plan.buffer_widths[free_buffers[i]];
      if (w >= width && (best == kForever || w < plan.buffer_widths[free_buffers[best]])) best = i;
      if (largest == kForever || w > plan.buffer_widths[free_buffers[largest]]) largest = i;
    }
    std::size_t buffer;
    if (best != kForever || largest != kForever) {
      const std::size_t pick = best != kForever ? best : largest;
      buffer = free_buffers[pick];
      free_buffers.erase(free_buffers.begin() + static_cast<std::ptrdiff_t>(pick));
      if (plan.buffer_widths[buffer] < width) plan.buffer_widths[buffer] = width;
    } else {
      buffer = plan.buffer_widths.size();
      plan.buffer_widths.push_back(width);
    }
    plan.value_buffer[nodes[n].output] = buffer;
    // Inputs read for the last time here are free for the nodes after this one (never for this
    // node's own output, which is written while they are read).
    for (ValueId input : nodes[n].inputs) {
      if (last_use[input] == n) {
        last_use[input] = kForever - 1;  // release once even if listed twice
        free_buffers.push_back(plan.value_buffer[input]);
      }
    }
  }
  return plan;
}

}  // namespace aft
