// A loaded model: the mapped file, its config and tokenizer, the graph that computes it and the
// plan of its buffers. Immutable after load; any number of sessions may share it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "aft_config.h"
#include "aft_lm_graph.h"
#include "engine/format/model_file.h"
#include "engine/format/tokenizer.h"
#include "engine/runtime/buffer_plan.h"
#include "kernels/packed_weights.h"
#include "session_state.h"

namespace aft {

// How a model computes and keeps its weights (aft_model_params).
struct ModelOptions {
  // How a prompt's products of f32 weights are computed.
  kernels::MatmulPrecision precision = kernels::MatmulPrecision::F32;
};

class Model {
 public:
  // Throws Error naming the file and the problem.
  static std::unique_ptr<const Model> load(const std::string& path, bool verify_checksums,
                                           ModelOptions options = {});
  // The same from a validated container (ModelFile::from_memory: a model held in memory).
  static std::unique_ptr<const Model> load(ModelFile file, ModelOptions options = {});

  const ModelFile& file() const { return file_; }
  const ModelConfig& config() const { return config_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const Graph& graph() const { return program_.graph; }
  const BufferPlan& buffer_plan() const { return plan_; }
  int64_t n_parameters() const { return n_parameters_; }
  // The header as sorted key/value strings (aft_model_metadata_at).
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }

  // The state of an empty sequence.
  SessionState initial_state() const;

 private:
  Model(ModelFile file, ModelConfig config, Tokenizer tokenizer, ModelOptions options);
  // A linear layer's weights for the graph, packed into packed_ (the GEMVs' layouts, on 2 MiB
  // pages; the file's pages are then no longer read).
  kernels::WeightMatrix weight_matrix(const TensorInfo& tensor);

  ModelFile file_;
  kernels::PackedWeights packed_;
  ModelConfig config_;
  Tokenizer tokenizer_;
  AftLmGraph program_;
  BufferPlan plan_;
  int64_t n_parameters_ = 0;
  std::vector<std::pair<std::string, std::string>> metadata_;
};

}  // namespace aft
