// ModelConfig: every variant parses; each bad field is refused naming its key; expected_tensors()
// follows docs/format.md's table for every variant.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/format/error.h"
#include "model_file_writer.h"
#include "models/aft/aft_config.h"

namespace {

using aft::ModelConfig;
using nlohmann::json;
using Shape = std::vector<int64_t>;

const char* const kWhere = "model.aft";

// Small and valid for `mixer`; d 16, 2 layers, T 64, ReLU, no position encoding.
json config_for(const std::string& mixer) {
  json c = aft::testing::tiny_config(mixer);
  c["activation"] = "relu";
  c["pos_encoding"] = "none";
  return c;
}

json factorized() {
  json c = config_for("full");
  c["full_bias"] = "factorized";
  c["bias_rank"] = 8;
  return c;
}

ModelConfig parse(const json& config) { return ModelConfig::from_json(config, kWhere); }

void expect_rejected(const json& config, const std::string& words) {
  try {
    parse(config);
    ADD_FAILURE() << "accepted: " << config.dump();
  } catch (const aft::Error& e) {
    EXPECT_EQ(e.status(), AFT_ERR_FORMAT);
    const std::string message = e.what();
    EXPECT_EQ(message.rfind(std::string(kWhere) + ": config", 0), 0u) << message;
    EXPECT_NE(message.find(words), std::string::npos) << message << "\nlacks: " << words;
  }
}

std::map<std::string, Shape> tensor_map(const json& config) {
  std::map<std::string, Shape> out;
  for (const aft::TensorSpec& s : aft::expected_tensors(parse(config))) {
    EXPECT_TRUE(out.emplace(s.name, s.shape).second) << "duplicate " << s.name;
  }
  return out;
}

// ---- Valid configs ----

TEST(ModelConfig, EveryVariantParses) {
  const ModelConfig simple = parse(config_for("simple"));
  EXPECT_EQ(simple.mixer, aft::Mixer::Simple);
  EXPECT_EQ(simple.vocab_size, 256);
  EXPECT_EQ(simple.d_model, 16);
  EXPECT_EQ(simple.n_layers, 2);
  EXPECT_EQ(simple.d_ff, 32);
  EXPECT_EQ(simple.activation, aft::Activation::Relu);
  EXPECT_EQ(simple.window, 0);
  EXPECT_EQ(simple.n_heads, 1);
  EXPECT_EQ(simple.bias_rank, 0);
  EXPECT_EQ(simple.max_seq_len, 64);
  EXPECT_EQ(simple.pos_encoding, aft::PosEncoding::None);
  EXPECT_FLOAT_EQ(simple.embed_scale, 4.0f);
  EXPECT_FALSE(simple.tied_embeddings);
  EXPECT_TRUE(simple.head_bias);
  EXPECT_FLOAT_EQ(simple.norm_eps, 1e-5f);

  const ModelConfig local = parse(config_for("local"));
  EXPECT_EQ(local.mixer, aft::Mixer::Local);
  EXPECT_EQ(local.window, 4);

  const ModelConfig conv = parse(config_for("conv"));
  EXPECT_EQ(conv.mixer, aft::Mixer::Conv);
  EXPECT_EQ(conv.n_heads, 2);
  EXPECT_EQ(conv.key_width(), 2);
  EXPECT_EQ(local.key_width(), 16);

  const ModelConfig table = parse(config_for("full"));
  EXPECT_EQ(table.mixer, aft::Mixer::Full);
  EXPECT_EQ(table.full_bias, aft::FullBias::Table);

  const ModelConfig decay = parse(config_for("decay"));
  EXPECT_EQ(decay.mixer, aft::Mixer::Decay);
  EXPECT_EQ(decay.key_width(), 16);
  EXPECT_FALSE(decay.token_shift);
  EXPECT_TRUE(parse(config_for("decay_shift")).token_shift);

  const ModelConfig fact = parse(factorized());
  EXPECT_EQ(fact.full_bias, aft::FullBias::Factorized);
  EXPECT_EQ(fact.bias_rank, 8);

  json other = config_for("simple");
  other["activation"] = "gelu";
  other["pos_encoding"] = "learned";
  other["tied_embeddings"] = true;
  other["head_bias"] = false;
  other["embed_scale"] = 1;  // an integer is a number too
  other["future_key"] = "ignored";
  const ModelConfig c = parse(other);
  EXPECT_EQ(c.activation, aft::Activation::Gelu);
  EXPECT_EQ(c.pos_encoding, aft::PosEncoding::Learned);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_FALSE(c.head_bias);
  EXPECT_FLOAT_EQ(c.embed_scale, 1.0f);
  other["pos_encoding"] = "sinusoidal";
  EXPECT_EQ(parse(other).pos_encoding, aft::PosEncoding::Sinusoidal);
}

TEST(ModelConfig, KeysAVariantDoesNotUseMayBeOmitted) {
  json simple = config_for("simple");
  for (const char* key : {"window", "n_heads", "full_bias", "bias_rank"}) simple.erase(key);
  const ModelConfig c = parse(simple);
  EXPECT_EQ(c.window, 0);
  EXPECT_EQ(c.n_heads, 1);
  EXPECT_EQ(c.bias_rank, 0);
  json table = config_for("full");
  table.erase("bias_rank");
  EXPECT_EQ(parse(table).bias_rank, 0);
  json conv = config_for("conv");
  conv["full_bias"] = "factorized";  // meaningless for conv, but valid
  EXPECT_EQ(parse(conv).bias_rank, 0);
}

TEST(ModelConfig, MaxPositions) {
  EXPECT_EQ(parse(config_for("simple")).max_positions(), 0);
  EXPECT_EQ(parse(config_for("conv")).max_positions(), 0);
  EXPECT_EQ(parse(config_for("local")).max_positions(), 64);
  EXPECT_EQ(parse(config_for("full")).max_positions(), 64);
  EXPECT_EQ(parse(factorized()).max_positions(), 64);
  json learned = config_for("conv");
  learned["pos_encoding"] = "learned";
  EXPECT_EQ(parse(learned).max_positions(), 64);
  learned["pos_encoding"] = "sinusoidal";
  EXPECT_EQ(parse(learned).max_positions(), 0);
  EXPECT_EQ(parse(config_for("decay")).max_positions(), 0);
}

TEST(ModelConfig, MixerNames) {
  EXPECT_STREQ(aft::to_string(aft::Mixer::Simple), "simple");
  EXPECT_STREQ(aft::to_string(aft::Mixer::Local), "local");
  EXPECT_STREQ(aft::to_string(aft::Mixer::Conv), "conv");
  EXPECT_STREQ(aft::to_string(aft::Mixer::Full), "full");
  EXPECT_STREQ(aft::to_string(aft::Mixer::Decay), "decay");
}

// ---- Invalid configs ----

TEST(ModelConfig, NotAnObject) {
  expect_rejected(json::array(), "model.aft: config: expected an object, found an array");
}

TEST(ModelConfig, MissingKeys) {
  for (const char* key :
       {"vocab_size", "d_model", "n_layers", "d_ff", "activation", "mixer", "max_seq_len",
        "pos_encoding", "embed_scale", "tied_embeddings", "head_bias", "norm_eps"}) {
    json c = config_for("simple");
    c.erase(key);
    expect_rejected(c, std::string("config.") + key + ": missing (expected ");
  }
  json local = config_for("local");
  local.erase("window");
  expect_rejected(local, "config.window: missing (expected an integer >= 1 for mixer \"local\")");
  json conv = config_for("conv");
  conv.erase("n_heads");
  expect_rejected(conv, "config.n_heads: missing");
  json full = config_for("full");
  full.erase("full_bias");
  expect_rejected(full, "config.full_bias: missing (expected one of \"table\", \"factorized\")");
  json fact = factorized();
  fact.erase("bias_rank");
  expect_rejected(fact, "config.bias_rank: missing");
}

TEST(ModelConfig, BadFieldValues) {
  struct Case {
    json config;
    const char* key;
    json value;
    std::string words;
  };
  const json simple = config_for("simple");
  const Case cases[] = {
      {simple, "d_model", "16", "config.d_model: expected an integer >= 1, found string \"16\""},
      {simple, "d_model", 16.0, "config.d_model: expected an integer >= 1, found 16.0"},
      {simple, "d_model", 0, "config.d_model: expected an integer >= 1, found 0"},
      {simple, "vocab_size", -3, "config.vocab_size: expected an integer >= 1, found -3"},
      {simple, "n_layers", nullptr, "config.n_layers: expected an integer >= 1, found null"},
      {simple, "d_ff", (1 << 24) + 1,
       "config.d_ff: expected an integer <= 16777216 (the limit of this build), found 16777217"},
      {simple, "d_ff", UINT64_MAX, "config.d_ff: expected an integer <= 16777216"},
      {simple, "d_ff", 1e30, "config.d_ff: expected an integer >= 1, found 1e+30"},
      {simple, "max_seq_len", json::array(), "config.max_seq_len: expected an integer >= 1"},
      {simple, "activation", "swish",
       "config.activation: expected one of \"relu\", \"gelu\", \"relu_squared\", found string "
       "\"swish\""},
      {simple, "mixer", 2,
       "config.mixer: expected one of \"simple\", \"local\", \"conv\", \"full\", \"decay\", found "
       "2"},
      {simple, "pos_encoding", "rope", "config.pos_encoding: expected one of"},
      {simple, "embed_scale", "8", "config.embed_scale: expected a finite number, found string"},
      {simple, "embed_scale", 1e39, "config.embed_scale: expected a finite number, found 1e+39"},
      {simple, "embed_scale", NAN, "config.embed_scale: expected a finite number"},
      {simple, "norm_eps", 0, "config.norm_eps: expected a finite number > 0, found 0"},
      {simple, "norm_eps", -1e-5, "config.norm_eps: expected a finite number > 0"},
      {simple, "norm_eps", 1e-50, "config.norm_eps: expected a finite number > 0"},  // 0 as float
      {simple, "tied_embeddings", 1, "config.tied_embeddings: expected true or false, found 1"},
      {simple, "head_bias", "yes", "config.head_bias: expected true or false, found string"},
      // Per-variant rules.
      {config_for("local"), "window", 0,
       "config.window: expected an integer >= 1 for mixer \"local\", found 0"},
      {config_for("conv"), "window", -1,
       "config.window: expected an integer >= 1 for mixer \"conv\", found -1"},
      {simple, "window", 3, "config.window: expected 0 for mixer \"simple\", found 3"},
      {config_for("full"), "window", 4, "config.window: expected 0 for mixer \"full\", found 4"},
      {config_for("conv"), "n_heads", 3, "config.n_heads: 3 does not divide d_model 16"},
      {config_for("conv"), "n_heads", 0,
       "config.n_heads: expected an integer >= 1 for mixer \"conv\", found 0"},
      {config_for("local"), "n_heads", 2,
       "config.n_heads: expected 1 for mixer \"local\", found 2"},
      {config_for("full"), "full_bias", "lowrank", "config.full_bias: expected one of"},
      {simple, "full_bias", 1,
       "config.full_bias: expected one of \"table\", \"factorized\", found 1"},
      {factorized(), "bias_rank", 0,
       "config.bias_rank: expected an integer >= 1 for full_bias \"factorized\", found 0"},
      {config_for("full"), "bias_rank", 4,
       "config.bias_rank: expected 0 unless mixer \"full\" has full_bias \"factorized\", found 4"},
      {simple, "bias_rank", 4, "config.bias_rank: expected 0"},
      {simple, "token_shift", true,
       "config.token_shift: expected false unless mixer is \"decay\", found true"},
      {config_for("decay"), "token_shift", 1,
       "config.token_shift: expected true or false, found 1"},
      {config_for("decay"), "window", 4, "config.window: expected 0 for mixer \"decay\", found 4"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.words);
    json config = c.config;
    config[c.key] = c.value;
    expect_rejected(config, c.words);
  }
}

// Files written before the key existed have no token_shift: no token shift.
TEST(ModelConfig, AbsentTokenShiftIsFalse) {
  json config = config_for("decay_shift");
  EXPECT_TRUE(parse(config).token_shift);
  config.erase("token_shift");
  EXPECT_FALSE(parse(config).token_shift);
  EXPECT_EQ(tensor_map(config), tensor_map(config_for("decay")));
}

TEST(ModelConfig, AbsurdModelSizeIsRefused) {
  json c = config_for("local");
  c["max_seq_len"] = 1 << 24;  // a 2^48-entry position table per layer
  expect_rejected(c, "config: the model would have more than 2^40 parameters");
  c = config_for("simple");
  c["n_layers"] = 1 << 24;
  c["d_model"] = 1 << 12;
  expect_rejected(c, "more than 2^40 parameters");
}

// ---- Tensors ----

// Shared by every variant: embedding, per-layer norms, projections and feed-forward, final norm.
void expect_common_tensors(const std::map<std::string, Shape>& t, const json& config) {
  const int64_t d = config["d_model"], v = config["vocab_size"], ff = config["d_ff"];
  EXPECT_EQ(t.at("embed.weight"), (Shape{v, d}));
  for (int layer = 0; layer < config["n_layers"].get<int>(); ++layer) {
    const std::string p = "layers." + std::to_string(layer) + ".";
    for (const char* norm : {"norm1", "norm2"}) {
      EXPECT_EQ(t.at(p + norm + ".weight"), (Shape{d}));
      EXPECT_EQ(t.at(p + norm + ".bias"), (Shape{d}));
    }
    for (const char* proj : {"query", "value", "output"}) {
      EXPECT_EQ(t.at(p + "mixer." + proj + ".weight"), (Shape{d, d}));
      EXPECT_EQ(t.at(p + "mixer." + proj + ".bias"), (Shape{d}));
    }
    EXPECT_EQ(t.at(p + "ffn.up.weight"), (Shape{ff, d}));
    EXPECT_EQ(t.at(p + "ffn.up.bias"), (Shape{ff}));
    EXPECT_EQ(t.at(p + "ffn.down.weight"), (Shape{d, ff}));
    EXPECT_EQ(t.at(p + "ffn.down.bias"), (Shape{d}));
  }
  EXPECT_EQ(t.at("norm.weight"), (Shape{d}));
  EXPECT_EQ(t.at("norm.bias"), (Shape{d}));
}

TEST(ExpectedTensors, Simple) {
  const json c = config_for("simple");
  const auto t = tensor_map(c);
  expect_common_tensors(t, c);
  EXPECT_EQ(t.at("layers.0.mixer.key.weight"), (Shape{16, 16}));
  EXPECT_EQ(t.at("layers.1.mixer.key.bias"), (Shape{16}));
  EXPECT_EQ(t.at("head.weight"), (Shape{256, 16}));
  EXPECT_EQ(t.at("head.bias"), (Shape{256}));
  EXPECT_EQ(t.count("layers.0.mixer.pos_bias"), 0u);
  EXPECT_EQ(t.count("pos_embed.weight"), 0u);
  EXPECT_EQ(t.size(), 1 + 2 * 16 + 2 + 2u);
}

TEST(ExpectedTensors, Local) {
  const json c = config_for("local");
  const auto t = tensor_map(c);
  expect_common_tensors(t, c);
  EXPECT_EQ(t.at("layers.0.mixer.pos_bias"), (Shape{64, 64}));
  EXPECT_EQ(t.at("layers.1.mixer.pos_bias"), (Shape{64, 64}));
  EXPECT_EQ(t.size(), 1 + 2 * 17 + 2 + 2u);
}

TEST(ExpectedTensors, Conv) {
  const json c = config_for("conv");
  const auto t = tensor_map(c);
  expect_common_tensors(t, c);
  EXPECT_EQ(t.at("layers.0.mixer.key.weight"), (Shape{2, 16}));
  EXPECT_EQ(t.at("layers.0.mixer.key.bias"), (Shape{2}));
  EXPECT_EQ(t.at("layers.1.mixer.pos_bias"), (Shape{2, 4}));
  EXPECT_EQ(t.size(), 1 + 2 * 17 + 2 + 2u);
}

TEST(ExpectedTensors, Decay) {
  const json c = config_for("decay");
  const auto t = tensor_map(c);
  expect_common_tensors(t, c);
  EXPECT_EQ(t.at("layers.0.mixer.key.weight"), (Shape{16, 16}));
  EXPECT_EQ(t.at("layers.1.mixer.decay"), (Shape{16}));
  EXPECT_EQ(t.at("layers.1.mixer.bonus"), (Shape{16}));
  EXPECT_EQ(t.count("layers.0.mixer.shift.query"), 0u);
  EXPECT_EQ(t.size(), 1 + 2 * 18 + 2 + 2u);
  const auto shifted = tensor_map(config_for("decay_shift"));
  for (const char* projection : {"query", "key", "value"}) {
    EXPECT_EQ(shifted.at(std::string("layers.1.mixer.shift.") + projection), (Shape{16}));
  }
  EXPECT_EQ(shifted.size(), 1 + 2 * 21 + 2 + 2u);
}

// RWKV-4's block: no linear biases, a LayerNorm on the embedding, channel mixing's gate and two
// token shifts per layer; the head keeps its own flag.
TEST(ExpectedTensors, Rwkv4) {
  const ModelConfig c = parse(aft::testing::tiny_config("rwkv4"));
  EXPECT_EQ(c.ffn, aft::FeedForward::ChannelMix);
  EXPECT_EQ(c.activation, aft::Activation::ReluSquared);
  EXPECT_FALSE(c.linear_bias);
  EXPECT_TRUE(c.embed_norm);
  const auto t = tensor_map(config_for("rwkv4"));
  EXPECT_EQ(t.at("embed_norm.weight"), (Shape{16}));
  EXPECT_EQ(t.at("embed_norm.bias"), (Shape{16}));
  EXPECT_EQ(t.at("layers.1.ffn.gate.weight"), (Shape{16, 16}));
  EXPECT_EQ(t.at("layers.1.ffn.up.weight"), (Shape{32, 16}));
  EXPECT_EQ(t.at("layers.1.ffn.shift.up"), (Shape{16}));
  EXPECT_EQ(t.at("layers.1.ffn.shift.gate"), (Shape{16}));
  for (const auto& [name, shape] : t) {
    const bool linear_bias =
        name.find("mixer.") != std::string::npos || name.find("ffn.") != std::string::npos;
    EXPECT_FALSE(linear_bias && name.size() > 5 && name.substr(name.size() - 5) == ".bias") << name;
  }
  // embed + embed_norm 2; per layer: 2 norms x 2, 4 mixer weights, decay, bonus, 3 shifts,
  // 3 feed-forward weights, 2 shifts; norm 2, head 1, head.bias 1 (tiny_config keeps it).
  EXPECT_EQ(t.size(), 3 + 2 * 18 + 2 + 2u);
  // Absent keys mean what older files meant: biases, no embedding norm, the plain feed-forward.
  json older = config_for("decay_shift");
  for (const char* key : {"ffn", "linear_bias", "embed_norm"}) older.erase(key);
  EXPECT_EQ(tensor_map(older), tensor_map(config_for("decay_shift")));
}

TEST(ExpectedTensors, FullTable) {
  const json c = config_for("full");
  const auto t = tensor_map(c);
  expect_common_tensors(t, c);
  EXPECT_EQ(t.at("layers.0.mixer.pos_bias"), (Shape{64, 64}));
  EXPECT_EQ(t.count("layers.0.mixer.pos_u"), 0u);
}

TEST(ExpectedTensors, FullFactorized) {
  const json c = factorized();
  const auto t = tensor_map(c);
  expect_common_tensors(t, c);
  EXPECT_EQ(t.at("layers.0.mixer.pos_u"), (Shape{64, 8}));
  EXPECT_EQ(t.at("layers.1.mixer.pos_v"), (Shape{64, 8}));
  EXPECT_EQ(t.count("layers.0.mixer.pos_bias"), 0u);
  EXPECT_EQ(t.size(), 1 + 2 * 18 + 2 + 2u);
}

TEST(ExpectedTensors, LearnedPositionsTiedHeadNoBias) {
  json c = config_for("simple");
  c["pos_encoding"] = "learned";
  c["tied_embeddings"] = true;
  c["head_bias"] = false;
  const auto t = tensor_map(c);
  expect_common_tensors(t, c);
  EXPECT_EQ(t.at("pos_embed.weight"), (Shape{64, 16}));
  EXPECT_EQ(t.count("head.weight"), 0u);
  EXPECT_EQ(t.count("head.bias"), 0u);
  c["head_bias"] = true;  // a tied head may still have its own bias
  const auto with_bias = tensor_map(c);
  EXPECT_EQ(with_bias.count("head.weight"), 0u);
  EXPECT_EQ(with_bias.at("head.bias"), (Shape{256}));
}

TEST(ExpectedTensors, FileOrderAndParameterCount) {
  for (const json& c : {config_for("simple"), config_for("local"), config_for("conv"),
                        config_for("full"), factorized()}) {
    const ModelConfig config = parse(c);
    const auto specs = aft::expected_tensors(config);
    EXPECT_EQ(specs.front().name, "embed.weight");
    EXPECT_EQ(specs[1].name, "layers.0.norm1.weight");
    EXPECT_EQ(specs.back().name, "head.bias");
    int64_t total = 0;
    for (const aft::TensorSpec& s : specs) {
      int64_t n = 1;
      for (const int64_t d : s.shape) n *= d;
      total += n;
    }
    EXPECT_EQ(config.n_parameters(), total) << c["mixer"];
  }
}

// matmul_parameters() is its own formula (read on every decode step): it must be the linear
// weights expected_tensors flags, plus the embedding when it is also the head.
TEST(ExpectedTensors, MatmulParametersAreTheLinearWeights) {
  for (json c : {config_for("simple"), config_for("local"), config_for("conv"), config_for("full"),
                 factorized()}) {
    for (const bool tied : {false, true}) {
      c["tied_embeddings"] = tied;
      const ModelConfig config = parse(c);
      int64_t total = tied ? config.vocab_size * config.d_model : 0;
      for (const aft::TensorSpec& s : aft::expected_tensors(config)) {
        int64_t n = 1;
        for (const int64_t d : s.shape) n *= d;
        if (s.linear_weight) total += n;
      }
      EXPECT_EQ(config.matmul_parameters(), total) << c;
    }
  }
}

}  // namespace
