// The configuration of an AFT language model (docs/format.md, "config"), and the tensors it
// implies.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/runtime/ops/pos_encoding.h"

namespace aft {

enum class Mixer { Simple, Local, Conv, Full, Decay };
enum class Activation { Relu, Gelu, ReluSquared };
// The block's feed-forward: up, activation, down; or RWKV-4's channel mixing, the same products on
// token-shifted inputs, gated by sigmoid(gate) (docs/format.md, "config").
enum class FeedForward { Mlp, ChannelMix };
enum class FullBias { Table, Factorized };

struct ModelConfig {
  int64_t vocab_size = 0;
  int64_t d_model = 0;
  int64_t n_layers = 0;
  int64_t d_ff = 0;
  Activation activation = Activation::Relu;
  Mixer mixer = Mixer::Simple;
  int64_t window = 0;
  int64_t n_heads = 1;
  FullBias full_bias = FullBias::Table;
  int64_t bias_rank = 0;
  int64_t max_seq_len = 0;
  PosEncoding pos_encoding = PosEncoding::None;
  float embed_scale = 1.0f;
  bool tied_embeddings = false;
  bool head_bias = true;
  float norm_eps = 1e-5f;
  // The query, key and value projections read mu x_t + (1 - mu) x_{t-1} (mixer "decay" only).
  bool token_shift = false;
  FeedForward ffn = FeedForward::Mlp;
  // Whether the mixer's and the feed-forward's linear layers have biases (RWKV-4's have none).
  bool linear_bias = true;
  // A LayerNorm on the embedding before the first layer (RWKV-4's ln0).
  bool embed_norm = false;

  // Parses and checks every field and their consistency; throws Error(AFT_ERR_FORMAT) with a
  // message "<where>: config.<key>: expected ..., found ...".
  static ModelConfig from_json(const nlohmann::json& config, const std::string& where);

  // Positions a sequence may reach: max_seq_len for absolute-position models, 0 = unlimited.
  int64_t max_positions() const;
  // The number of weights expected_tensors() adds up to (saturating above 2^40).
  int64_t n_parameters() const;
  int64_t key_width() const { return mixer == Mixer::Conv ? n_heads : d_model; }
  // Whether each layer's mixer.pos_bias is a [max_seq_len, max_seq_len] table: mixer "local", or
  // "full" with full_bias "table" (docs/format.md, "Tensors").
  bool pos_bias_table() const {
    return mixer == Mixer::Local || (mixer == Mixer::Full && full_bias == FullBias::Table);
  }
  // Weights of the query, key, value, output and feed-forward products of every layer and of the
  // head (vocab x d), without biases: what decoding a token reads. No overflow: a checked config
  // has at most 2^40 parameters in all.
  int64_t matmul_parameters() const {
    const int64_t gate = ffn == FeedForward::ChannelMix ? d_model * d_model : 0;
    const int64_t per_layer = d_model * (3 * d_model + key_width()) + 2 * d_model * d_ff + gate;
    return n_layers * per_layer + vocab_size * d_model;
  }
};

const char* to_string(Mixer mixer);

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  // A linear layer's weight matrix: may be stored as bf16 or q8_0; every other tensor is f32.
  bool linear_weight = false;
};

// Every tensor a model with this config has, in file order (docs/format.md, "Tensors").
std::vector<TensorSpec> expected_tensors(const ModelConfig& config);

}  // namespace aft
