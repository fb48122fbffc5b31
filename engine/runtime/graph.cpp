#include "graph.h"

#include "engine/format/error.h"

namespace aft {

void Op::prepare(const ExecContext&, std::size_t) const {}

void Op::run_in_team(const ExecContext& ctx, const std::vector<Tensor>& inputs, const Tensor& out,
                     Team team) const {
  if (team.id != 0) return;
  ExecContext alone = ctx;
  alone.n_threads = 1;
  alone.one_region = false;
  run(alone, inputs, out);
}

bool Op::touches_only_its_tensors(std::size_t) const { return false; }

PreparedInput Op::prepares_input(const ExecContext&, std::size_t) const {
  return PreparedInput::None;
}

ValueId Graph::add_node(std::unique_ptr<Op> op, std::vector<ValueId> inputs,
                        const std::string& name, std::size_t width, RowSet rows) {
  for (ValueId input : inputs) {
    if (input >= values_.size()) {
      throw Error(AFT_ERR_INTERNAL, "graph: node " + name + " reads an undefined value");
    }
    if (values_[input].rows == RowSet::Output && rows == RowSet::Tokens) {
      throw Error(AFT_ERR_INTERNAL, "graph: node " + name + " needs rows its input does not have");
    }
  }
  const ValueId id = values_.size();
  values_.push_back(Value{width, rows});
  nodes_.push_back(Node{std::move(op), std::move(inputs), id});
  return id;
}

}  // namespace aft
