// An AFT language model as an op graph (docs/architecture.md, "The graph"):
//   embedding (+ positions) -> N x [x += mixer(norm1(x)); x += ffn(norm2(x))] -> norm -> head.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "aft_config.h"
#include "engine/runtime/graph.h"
#include "kernels/matmul.h"
#include "kernels/weight_matrix.h"
#include "position_bias.h"

namespace aft {

struct AftLmGraph {
  std::vector<std::unique_ptr<PositionBias>>
      position_biases;  // per AFT mixer layer, read by its op
  Graph graph;          // logits [rows, vocab_size]
};

// Tensors named as in docs/format.md, already checked for shape and dtype: `weight` returns an f32
// tensor read in place, `matrix` a linear layer's weights (f32, bf16 or q8_0; the head's may be
// the embedding's) packed for the kernels.
using TensorLookup = std::function<const float*(const std::string& name)>;
using MatrixLookup = std::function<kernels::WeightMatrix(const std::string& name)>;

// precision: how the prompt's products of f32 weights are computed (kernels::MatmulPrecision).
AftLmGraph build_aft_lm_graph(const ModelConfig& config, const TensorLookup& weight,
                              const MatrixLookup& matrix,
                              kernels::MatmulPrecision precision = kernels::MatmulPrecision::F32);

}  // namespace aft
