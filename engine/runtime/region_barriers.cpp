#include "region_barriers.h"

#include <algorithm>

namespace aft {
namespace {

bool contains(const std::vector<std::size_t>& buffers, std::size_t buffer) {
  return std::find(buffers.begin(), buffers.end(), buffer) != buffers.end();
}

}  // namespace

void RegionBarriers::plan(const Graph& graph, const BufferPlan& buffers,
                          const std::vector<std::size_t>& node_rows,
                          const std::vector<bool>& prepared) {
  if (&graph == graph_ && &buffers == buffers_ && node_rows == node_rows_ &&
      prepared == prepared_) {
    return;
  }
  // Kept only once whole: an allocation that fails below leaves no plan to reuse.
  graph_ = nullptr;
  const std::vector<Node>& nodes = graph.nodes();
  after_.assign(nodes.size(), false);
  read_.clear();
  written_.clear();
  std::size_t previous = nodes.size();  // the last node that runs so far
  bool previous_local = false;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (node_rows[i] == 0) continue;
    const Node& node = nodes[i];
    const bool local = prepared[i] || node.op->touches_only_its_tensors(node_rows[i]);
    const std::size_t output = buffers.value_buffer[node.output];
    if (previous < nodes.size()) {
      bool independent = (previous_local || prepared[i]) && local && !contains(read_, output) &&
                         !contains(written_, output);
      for (ValueId input : node.inputs) {
        independent = independent && !contains(written_, buffers.value_buffer[input]);
      }
      if (!independent) {
        after_[previous] = true;
        read_.clear();
        written_.clear();
      }
    }
    for (ValueId input : node.inputs) read_.push_back(buffers.value_buffer[input]);
    written_.push_back(output);
    previous = i;
    previous_local = local;
  }
  if (previous < nodes.size()) after_[previous] = true;
  node_rows_ = node_rows;
  prepared_ = prepared;
  buffers_ = &buffers;
  graph_ = &graph;
}

}  // namespace aft
