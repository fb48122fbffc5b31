#include "model.h"

#include <unordered_map>

#include "describe.h"
#include "error.h"

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
    if (tensor->dtype != DType::F32) {
      throw Error(AFT_ERR_FORMAT,
                  file.path() + ": tensor \"" + spec.name + "\": only f32 weights are supported");
    }
  }
}

}  // namespace

std::unique_ptr<const Model> Model::load(const std::string& path, bool verify_checksums) {
  ModelFile file = ModelFile::open(path, verify_checksums);
  ModelConfig config = ModelConfig::from_json(file.config(), path);
  Tokenizer tokenizer = Tokenizer::from_json(file.tokenizer(), path);
  if (static_cast<int64_t>(tokenizer.vocab_size()) != config.vocab_size) {
    throw Error(AFT_ERR_FORMAT,
                path + ": the tokenizer has " + std::to_string(tokenizer.vocab_size()) +
                    " tokens, config.vocab_size is " + std::to_string(config.vocab_size));
  }
  check_tensors(file, config);
  return std::unique_ptr<const Model>(
      new Model(std::move(file), std::move(config), std::move(tokenizer)));
}

Model::Model(ModelFile file, ModelConfig config, Tokenizer tokenizer)
    : file_(std::move(file)), config_(std::move(config)), tokenizer_(std::move(tokenizer)) {
  program_ = build_aft_lm_graph(config_, [this](const std::string& name) {
    return static_cast<const float*>(file_.find(name)->data);
  });
  plan_ = plan_buffers(program_.graph);
  metadata_ = file_.header_strings();
  for (const TensorInfo& tensor : file_.tensors()) {
    int64_t count = 1;
    for (int64_t dim : tensor.shape) count *= dim;
    n_parameters_ += count;
  }
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
    layer.reset();
  }
  return state;
}

}  // namespace aft
