// The op graph of a model: values (row-major matrices, one row per token) and the nodes that
// compute them, in execution order. Built once per model by its family (models/), immutable
// afterwards, shared by sessions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "parallel.h"
#include "scratch.h"
#include "sequence.h"
#include "tensor.h"

namespace aft {

// Which rows a value holds. Token values have a row for every token of the call; output values only
// the rows whose logits are wanted (all of them, or just the last). Work after the last AFT mixer
// is per row, so it only runs on output rows.
enum class RowSet { Tokens, Output };

// A call's context: a batch of rows, each the token of a sequence. A session's call has one
// sequence, whose next tokens the rows are, in order (row r at the sequence's position + r); a
// batch decode (aft_batch_decode) one per row, row r the next token of sequences[r]. Before the
// call, the session gave every sequence's state what the call's positions need (for AFT,
// StateRollback::begin): ops do not allocate state.
struct ExecContext {
  const kernels::KernelTable& kernels;
  int n_threads;
  const int32_t* tokens;  // the call's tokens, already validated
  const Sequence* sequences;
  std::size_t n_sequences;  // 1, or the call's rows
  Scratch& scratch;         // the ops' working memory (scratch.h)
  // Run this call's ops in a single parallel region (executor.cpp): a decoded token, or a batch's
  // tokens (one per sequence).
  bool one_region = false;
  // Set by the executor for one node: the node that ran before it prepared this node's first input
  // the same way for the same rows (Op::prepares_input) into the scratch the threads share, and
  // nothing has written the input since. The op reads what is there instead of preparing it again:
  // a batch's query, key and value products quantize their norm once.
  bool input_prepared = false;

  // Whether every row is a token of one sequence (a prompt's rows see each other).
  bool one_sequence() const { return n_sequences == 1; }
  const Sequence& sequence_of(std::size_t row) const { return sequences[one_sequence() ? 0 : row]; }
  SequenceState& state_of(std::size_t row) const { return *sequence_of(row).state; }
  SequenceRollback* rollback_of(std::size_t row) const { return sequence_of(row).rollback; }
  // The position of row's token: its sequence's position (before the call) plus the rows of the
  // sequence before it.
  int64_t position_of(std::size_t row) const {
    return state_of(row).position + (one_sequence() ? static_cast<int64_t>(row) : 0);
  }
};

// What an op makes of its first input before its products, in the scratch its threads share
// (Scratch::shared): nothing, its rows quantized to 8-bit blocks, or rounded to bf16.
enum class PreparedInput { None, Q8_0, Bf16 };

class Op {
 public:
  virtual ~Op() = default;
  // inputs are sliced to out.rows rows (the last ones) when the node produces output rows.
  virtual void run(const ExecContext& ctx, const std::vector<Tensor>& inputs,
                   const Tensor& out) const = 0;

  // A decoded token or a batch's in one parallel region (ExecContext::one_region): first prepare()
  // for every op on one thread, before the region (what must not race: growing state, flags, what
  // its threads share in the scratch); then every thread of the team calls run_in_team() for each
  // op in turn, with a barrier after each. An op does its share of the work, split as run() would
  // split it over team.size threads, so the results are the same bits. The default: thread 0 runs
  // run() alone (the same context, on one thread).
  virtual void prepare(const ExecContext& ctx, std::size_t rows) const;
  virtual void run_in_team(const ExecContext& ctx, const std::vector<Tensor>& inputs,
                           const Tensor& out, Team team) const;
  // Whether run_in_team for `rows` rows reads nothing but its inputs and the model's weights and
  // writes nothing but its output: no sequence state, nothing its members share in the scratch,
  // no sync between them. Then the executor may leave out the barrier between it and a
  // neighbour of the same kind that does not read what it writes (region_barriers.h).
  virtual bool touches_only_its_tensors(std::size_t rows) const;
  // What a call of `rows` rows (of ctx's kind: a prompt's, a batch's, in one region or not)
  // prepares of inputs[0] for the next node to reuse (ExecContext::input_prepared). An op that
  // prepares it does so before its members sync, and otherwise touches only its tensors, so a
  // neighbour that reuses it needs no barrier after it (region_barriers.h).
  virtual PreparedInput prepares_input(const ExecContext& ctx, std::size_t rows) const;
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
