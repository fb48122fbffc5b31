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
#include "tensor.h"

namespace aft {

struct SessionState;

// Which rows a value holds. Token values have a row for every token of the call; output values only
// the rows whose logits are wanted (all of them, or just the last). Work after the last AFT mixer
// is per row, so it only runs on output rows.
enum class RowSet { Tokens, Output };

struct ExecContext {
  const kernels::KernelTable& kernels;
  int n_threads;
  int64_t position;       // of the first token of this call
  const int32_t* tokens;  // the call's tokens, already validated
  SessionState& state;
};

class Op {
 public:
  virtual ~Op() = default;
  virtual const char* name() const = 0;
  // inputs are sliced to out.rows rows (the last ones) when the node produces output rows.
  virtual void run(const ExecContext& ctx, const std::vector<Tensor>& inputs,
                   const Tensor& out) const = 0;
};

using ValueId = std::size_t;

struct Value {
  std::string name;
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
  ValueId add_node(std::unique_ptr<Op> op, std::vector<ValueId> inputs, std::string name,
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
