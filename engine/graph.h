// The op graph of a model: values (row-major matrices, one row per token) and the nodes that
// compute them, in execution order. Built once per model by models/, immutable afterwards, shared
// by sessions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "parallel.h"
#include "session_state.h"
#include "tensor.h"

namespace aft {

class StateRollback;

// Which rows a value holds. Token values have a row for every token of the call; output values only
// the rows whose logits are wanted (all of them, or just the last). Work after the last AFT mixer
// is per row, so it only runs on output rows.
enum class RowSet { Tokens, Output };

// A call's context. Before it, the session gave every layer's state the rows the call's positions
// need (StateRollback::begin): ops do not allocate state.
struct ExecContext {
  const kernels::KernelTable& kernels;
  int n_threads;
  int64_t position;       // of the first token of this call
  const int32_t* tokens;  // the call's tokens, already validated
  SessionState& state;
  // Run this one-token call's ops in a single parallel region (executor.cpp).
  bool one_region = false;
  // A batch decode (aft_batch_decode): row r is the next token of another sequence, whose state
  // is batch_states[r]. Null: every row is a token of `state`.
  SessionState* const* batch_states = nullptr;
  // Where the mixers save what they change beyond what the session saved before the call
  // (state_rollback.h): of `state`, or of batch_states[r] (batch_rollbacks[r]).
  StateRollback* rollback = nullptr;
  StateRollback* const* batch_rollbacks = nullptr;

  SessionState& state_of(std::size_t row) const {
    return batch_states ? *batch_states[row] : state;
  }
  StateRollback* rollback_of(std::size_t row) const {
    return batch_states ? batch_rollbacks[row] : rollback;
  }
  int64_t position_of(std::size_t row) const {
    return batch_states ? batch_states[row]->position : position + static_cast<int64_t>(row);
  }
};

class Op {
 public:
  virtual ~Op() = default;
  // inputs are sliced to out.rows rows (the last ones) when the node produces output rows.
  virtual void run(const ExecContext& ctx, const std::vector<Tensor>& inputs,
                   const Tensor& out) const = 0;

  // A decoded token in one parallel region (ExecContext::one_region): first prepare() for every
  // op on one thread, before the region (what must not race: growing state, flags); then every
  // thread of the team calls run_in_team() for each op in turn, with a barrier after each. An op
  // does its share of the work, split as run() would split it over team.size threads, so the
  // results are the same bits. The default: thread 0 runs run() alone.
  virtual void prepare(const ExecContext& ctx, std::size_t rows) const;
  virtual void run_in_team(const ExecContext& ctx, const std::vector<Tensor>& inputs,
                           const Tensor& out, Team team) const;
};

using ValueId = std::size_t;

struct Value {
  std::size_t width;
  RowSet rows;
};

struct Node {
  std::unique_ptr<Op> op;
  std::vector<ValueId> inputs;
  ValueId output;
};

class Graph {
 public:
  // name: for the messages of a malformed graph.
  ValueId add_node(std::unique_ptr<Op> op, std::vector<ValueId> inputs, const std::string& name,
                   std::size_t width, RowSet rows);
  void set_output(ValueId value) { output_ = value; }

  const std::vector<Value>& values() const { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  ValueId output() const { return output_; }

 private:
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  ValueId output_ = 0;
};

}  // namespace aft
