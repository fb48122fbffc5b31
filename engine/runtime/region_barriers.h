// Where the members of a call run in one parallel region (executor.cpp) wait for each other. Every
// member runs every node in turn; a barrier after a node makes its output whole before anyone goes
// on. It is left out between two nodes that each touch nothing but their own tensors
// (Op::touches_only_its_tensors) when the later one reads no buffer written since the last barrier
// and writes none read or written since: a decoded token's query, key and value products read the
// same norm into buffers of their own (24 of an enwik8 token's 111 barriers). A node whose input
// the node before prepared (prepared_inputs.h) counts as such a node, and the node before as one
// beside it: what that one shares it prepared before its members synced, and the reuser only reads
// it (a batch's key and value products after its query's).
#pragma once

#include <cstddef>
#include <vector>

#include "buffer_plan.h"
#include "graph.h"

namespace aft {

class RegionBarriers {
 public:
  // node_rows[i]: the rows node i computes in this call (0: it does not run); prepared[i]: whether
  // its input is prepared (plan_prepared_inputs). The plan of the last call is kept (a graph and
  // its buffer plan do not change while a model is loaded): a decode's calls, all alike, plan
  // once (0.7 us an enwik8 token otherwise).
  void plan(const Graph& graph, const BufferPlan& buffers,
            const std::vector<std::size_t>& node_rows, const std::vector<bool>& prepared);

  // Whether members wait for each other after node i (always after the last node that runs).
  bool after(std::size_t node) const { return after_[node]; }

 private:
  // What the plan is for.
  const Graph* graph_ = nullptr;
  const BufferPlan* buffers_ = nullptr;
  std::vector<std::size_t> node_rows_;
  std::vector<bool> prepared_;
  std::vector<bool> after_;
  // The buffers read and written by the nodes since the last barrier.
  std::vector<std::size_t> read_, written_;
};

}  // namespace aft
