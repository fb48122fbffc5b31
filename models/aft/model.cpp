#include "model.h"

#include <unordered_map>

#include "engine/format/describe.h"
#include "engine/format/error.h"
#include "engine/runtime/physical_cores.h"

namespace aft {
namespace {

// The file must hold exactly the tensors the config implies, with their shapes.
void check_tensors(const ModelFile& file, const ModelConfig& config) {
  const std::vector<TensorSpec> expected = expected_tensors(config);
  std::unordered_map<std::string, const TensorSpec*> by_name;
  for (const TensorSpec& spec : expected) by_name[spec.name] = &spec;
  for (const TensorInfo& tensor : file.tensors()) {
    if (by_name.count(tensor.name) == 0) {
      throw Error(AFT_ERR_FORMAT, file.path() + ": tensor \"" + tensor.name +
                                      "\" is not part of a " + to_string(config.mixer) +
                                      " model with this config");
    }
  }
  for (const TensorSpec& spec : expected) {
    const TensorInfo* tensor = file.find(spec.name);
    if (!tensor) {
      throw Error(AFT_ERR_FORMAT, file.path() + ": missing tensor \"" + spec.name + "\" (shape " +
                                      shape_string(spec.shape) + ")");
    }
    if (tensor->shape != spec.shape) {
      throw Error(AFT_ERR_FORMAT, file.path() + ": tensor \"" + spec.name + "\": expected shape " +
                                      shape_string(spec.shape) + ", found " +
                                      shape_string(tensor->shape));
    }
    if (tensor->dtype != DType::F32 && !spec.linear_weight) {
      throw Error(AFT_ERR_FORMAT, file.path() + ": tensor \"" + spec.name +
                                      "\": expected f32, found " + dtype_name(tensor->dtype) +
                                      " (only linear layers' weights may be bf16 or q8_0)");
    }
  }
}

// Values in a tensor: the product of its dimensions (1 for a scalar).
std::size_t element_count(const TensorInfo& tensor) {
  std::size_t count = 1;
  for (int64_t dim : tensor.shape) count *= static_cast<std::size_t>(dim);
  return count;
}

}  // namespace

std::unique_ptr<const Model> Model::load(const std::string& path, bool verify_checksums,
                                         ModelOptions options) {
  return load(ModelFile::open(path, verify_checksums), options);
}

std::unique_ptr<const Model> Model::load(ModelFile file, ModelOptions options) {
  const std::string& path = file.path();
  ModelConfig config = ModelConfig::from_json(file.config(), path);
  Tokenizer tokenizer = Tokenizer::from_json(file.tokenizer(), path);
  if (static_cast<int64_t>(tokenizer.vocab_size()) != config.vocab_size) {
    throw Error(AFT_ERR_FORMAT,
                path + ": the tokenizer has " + std::to_string(tokenizer.vocab_size()) +
                    " tokens, config.vocab_size is " + std::to_string(config.vocab_size));
  }
  check_tensors(file, config);
  return std::unique_ptr<const Model>(
      new Model(std::move(file), std::move(config), std::move(tokenizer), options));
}

Model::Model(ModelFile file, ModelConfig config, Tokenizer tokenizer, ModelOptions options)
    : file_(std::move(file)), config_(std::move(config)), tokenizer_(std::move(tokenizer)) {
  // Every tensor that is not f32 is a linear layer's weights, two dimensions (check_tensors).
  // Linear layers' weights, and the embedding where the head shares it, are packed once each for
  // the kernels; the graph reads every other tensor in place.
  std::size_t packed_bytes = 0;
  for (const TensorSpec& spec : expected_tensors(config_)) {
    if (!spec.linear_weight && !(config_.tied_embeddings && spec.name == "embed.weight")) continue;
    const TensorInfo& tensor = *file_.find(spec.name);
    const auto rows = static_cast<std::size_t>(tensor.shape[0]);
    const std::size_t cols = element_count(tensor) / rows;
    packed_bytes += tensor.dtype == DType::BF16   ? kernels::PackedWeights::bf16_bytes(rows, cols)
                    : tensor.dtype == DType::Q8_0 ? kernels::PackedWeights::q8_0_bytes(rows, cols)
                                                  : kernels::PackedWeights::f32_bytes(rows, cols);
  }
  packed_ = kernels::PackedWeights(packed_bytes, physical_cores());
  program_ = build_aft_lm_graph(
      config_,
      [this](const std::string& name) { return static_cast<const float*>(file_.find(name)->data); },
      [this](const std::string& name) { return weight_matrix(*file_.find(name)); },
      options.precision);
  plan_ = plan_buffers(program_.graph);
  metadata_ = file_.header_strings();
  for (const TensorInfo& tensor : file_.tensors()) {
    n_parameters_ += static_cast<int64_t>(element_count(tensor));
  }
}

kernels::WeightMatrix Model::weight_matrix(const TensorInfo& tensor) {
  const auto rows = static_cast<std::size_t>(tensor.shape[0]);
  const std::size_t cols = element_count(tensor) / rows;
  const kernels::WeightMatrix packed =
      tensor.dtype == DType::F32
          ? packed_.add_f32(rows, cols, static_cast<const float*>(tensor.data))
      : tensor.dtype == DType::BF16
          ? packed_.add_bf16(rows, cols, static_cast<const uint16_t*>(tensor.data))
          : packed_.add_q8_0(rows, cols, tensor.q8_0_quants(), tensor.q8_0_scales());
  // Only the packed copy is read from now on (a tied embedding's rows are read again as needed):
  // the mapping need not keep the file's pages resident.
  file_.release(tensor);
  return packed;
}

SessionState Model::initial_state() const {
  std::size_t capacity = 0;
  if (config_.mixer == Mixer::Local || config_.mixer == Mixer::Conv) {
    capacity = static_cast<std::size_t>(config_.window);
  } else if (config_.mixer == Mixer::Full) {
    capacity = static_cast<std::size_t>(config_.max_seq_len);
  }
  SessionState state;
  state.layers.resize(static_cast<std::size_t>(config_.n_layers));
  for (MixerState& layer : state.layers) {
    layer.capacity = capacity;
    layer.m.resize(static_cast<std::size_t>(config_.d_model));
    layer.a.resize(layer.m.size());
    layer.b.resize(layer.m.size());
    layer.frame.resize(layer.m.size());
    if (config_.token_shift) layer.last_input.resize(layer.m.size());
    if (config_.ffn == FeedForward::ChannelMix) layer.ffn_last_input.resize(layer.m.size());
    layer.reset();
  }
  return state;
}

}  // namespace aft
