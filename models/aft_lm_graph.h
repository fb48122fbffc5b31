// An AFT language model as an op graph (docs/architecture.md, "The graph"):
//   embedding (+ positions) -> N x [x += mixer(norm1(x)); x += ffn(norm2(x))] -> norm -> head.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "aft_config.h"
#include "engine/graph.h"
#include "position_bias.h"

namespace aft {

struct AftLmGraph {
  std::vector<std::unique_ptr<PositionBias>> position_biases;  // per layer, read by the mixer ops
  Graph graph;                                                 // logits [rows, vocab_size]
};

// `weight` returns the f32 data of a tensor named as in docs/format.md (already checked for shape).
using WeightLookup = std::function<const float*(const std::string& name)>;

AftLmGraph build_aft_lm_graph(const ModelConfig& config, const WeightLookup& weight);

}  // namespace aft
