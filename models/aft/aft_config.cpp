#include "aft_config.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "engine/format/describe.h"
#include "engine/format/error.h"

namespace aft {
namespace {

using nlohmann::json;

// Bounds that keep every size and product far inside int64 and refuse absurd allocations early.
constexpr int64_t kMaxDim = int64_t{1} << 24;
constexpr int64_t kMaxParameters = int64_t{1} << 40;

class Reader {
 public:
  Reader(const json& config, const std::string& where) : config_(config), where_(where) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw Error(AFT_ERR_FORMAT, where_ + ": config" + (key.empty() ? "" : "." + key) + ": " + what);
  }

  const json* find(const char* key) const {
    const auto it = config_.find(key);
    return it == config_.end() ? nullptr : &*it;
  }

  const json& require(const char* key, const std::string& expectation) const {
    const json* value = find(key);
    if (value == nullptr) fail(key, "missing (expected " + expectation + ")");
    return *value;
  }

  // An integer in [min, kMaxDim]; `context` says why the bound applies (" for mixer \"local\"").
  int64_t integer(const char* key, int64_t min, const std::string& context = "") const {
    const std::string expectation = "an integer >= " + std::to_string(min) + context;
    const json& value = require(key, expectation);
    return checked_integer(key, value, min, kMaxDim, expectation);
  }

  // A key the variant does not use: absent, or exactly `only`.
  int64_t unused_integer(const char* key, int64_t only, const std::string& context) const {
    const json* value = find(key);
    if (value == nullptr) return only;
    const std::string expectation = std::to_string(only) + context;
    return checked_integer(key, *value, only, only, expectation);
  }

  double number(const char* key, bool positive) const {
    const std::string expectation = positive ? "a finite number > 0" : "a finite number";
    const json& value = require(key, expectation);
    // Must survive the conversion to float the engine computes with.
    if (!value.is_number() || !std::isfinite(static_cast<float>(value.get<double>())) ||
        (positive && !(static_cast<float>(value.get<double>()) > 0.0f))) {
      fail(key, "expected " + expectation + ", found " + describe(value));
    }
    return value.get<double>();
  }

  bool boolean(const char* key) const {
    const json& value = require(key, "true or false");
    if (!value.is_boolean()) fail(key, "expected true or false, found " + describe(value));
    return value.get<bool>();
  }

  // One of `names`; returns its index.
  template <std::size_t N>
  std::size_t choice(const char* key, const char* const (&names)[N], bool required = true) const {
    std::string expectation = "one of";
    for (std::size_t i = 0; i < N; ++i)
      expectation += std::string(i ? ", " : " ") + json_quote(names[i]);
    const json* value = find(key);
    if (value == nullptr) {
      if (required) fail(key, "missing (expected " + expectation + ")");
      return 0;
    }
    for (std::size_t i = 0; i < N; ++i) {
      if (*value == names[i]) return i;
    }
    fail(key, "expected " + expectation + ", found " + describe(*value));
  }

 private:
  int64_t checked_integer(const char* key, const json& value, int64_t min, int64_t max,
                          const std::string& expectation) const {
    // Parsed non-negative integers are unsigned in nlohmann; floats such as 4.0 are refused.
    if (!value.is_number_integer())
      fail(key, "expected " + expectation + ", found " + describe(value));
    const bool huge =
        value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(kMaxDim);
    const int64_t v = huge ? kMaxDim + 1 : value.get<int64_t>();
    if (v < min) fail(key, "expected " + expectation + ", found " + describe(value));
    if (v > max) {
      if (min == max) fail(key, "expected " + expectation + ", found " + describe(value));
      fail(key, "expected an integer <= " + std::to_string(max) +
                    " (the limit of this build), found " + describe(value));
    }
    return v;
  }

  const json& config_;
  const std::string& where_;
};

}  // namespace

const char* to_string(Mixer mixer) {
  switch (mixer) {
    case Mixer::Simple:
      return "simple";
    case Mixer::Local:
      return "local";
    case Mixer::Conv:
      return "conv";
    case Mixer::Full:
      return "full";
    case Mixer::Decay:
      return "decay";
  }
  return "unknown";
}

ModelConfig ModelConfig::from_json(const json& config, const std::string& where) {
  const Reader r(config, where);
  if (!config.is_object()) r.fail("", "expected an object, found " + describe(config));

  ModelConfig c;
  c.vocab_size = r.integer("vocab_size", 1);
  c.d_model = r.integer("d_model", 1);
  c.n_layers = r.integer("n_layers", 1);
  c.d_ff = r.integer("d_ff", 1);
  static const char* const kActivations[] = {"relu", "gelu", "relu_squared"};
  c.activation = static_cast<Activation>(r.choice("activation", kActivations));
  static const char* const kMixers[] = {"simple", "local", "conv", "full", "decay"};
  c.mixer = static_cast<Mixer>(r.choice("mixer", kMixers));

  const std::string for_mixer = std::string(" for mixer ") + json_quote(to_string(c.mixer));
  const bool windowed = c.mixer == Mixer::Local || c.mixer == Mixer::Conv;
  c.window =
      windowed ? r.integer("window", 1, for_mixer) : r.unused_integer("window", 0, for_mixer);
  if (c.mixer == Mixer::Conv) {
    c.n_heads = r.integer("n_heads", 1, for_mixer);
    if (c.d_model % c.n_heads != 0) {
      r.fail("n_heads",
             std::to_string(c.n_heads) + " does not divide d_model " + std::to_string(c.d_model));
    }
  } else {
    c.n_heads = r.unused_integer("n_heads", 1, for_mixer);
  }
  // full_bias means nothing to other mixers, but a present value must still be a valid one.
  static const char* const kFullBiases[] = {"table", "factorized"};
  c.full_bias = static_cast<FullBias>(r.choice("full_bias", kFullBiases, c.mixer == Mixer::Full));
  const bool factorized = c.mixer == Mixer::Full && c.full_bias == FullBias::Factorized;
  c.bias_rank =
      factorized
          ? r.integer("bias_rank", 1, " for full_bias \"factorized\"")
          : r.unused_integer("bias_rank", 0, " unless mixer \"full\" has full_bias \"factorized\"");

  c.max_seq_len = r.integer("max_seq_len", 1);
  static const char* const kPosEncodings[] = {"none", "sinusoidal", "learned"};
  c.pos_encoding = static_cast<PosEncoding>(r.choice("pos_encoding", kPosEncodings));
  c.embed_scale = static_cast<float>(r.number("embed_scale", false));
  c.tied_embeddings = r.boolean("tied_embeddings");
  c.head_bias = r.boolean("head_bias");
  c.norm_eps = static_cast<float>(r.number("norm_eps", true));
  // Absent in files written before the key existed: false.
  c.token_shift = r.find("token_shift") != nullptr && r.boolean("token_shift");
  if (c.token_shift && c.mixer != Mixer::Decay)
    r.fail("token_shift", "expected false unless mixer is \"decay\", found true");
  // The keys below came after the others too: absent, they take the value of older files.
  static const char* const kFeedForwards[] = {"mlp", "channel_mix"};
  c.ffn = static_cast<FeedForward>(r.choice("ffn", kFeedForwards, false));
  if (c.ffn == FeedForward::ChannelMix && c.mixer != Mixer::Decay)
    r.fail("ffn", "expected \"mlp\" unless mixer is \"decay\", found \"channel_mix\"");
  c.linear_bias = r.find("linear_bias") == nullptr || r.boolean("linear_bias");
  c.embed_norm = r.find("embed_norm") != nullptr && r.boolean("embed_norm");

  if (c.n_parameters() > kMaxParameters) {
    r.fail("", "the model would have more than 2^40 parameters (the limit of this build)");
  }
  return c;
}

int64_t ModelConfig::max_positions() const {
  const bool absolute =
      mixer == Mixer::Local || mixer == Mixer::Full || pos_encoding == PosEncoding::Learned;
  return absolute ? max_seq_len : 0;
}

int64_t ModelConfig::n_parameters() const {
  // From the tensors of no layer and of one, so that a hostile n_layers allocates nothing. Neither
  // sum overflows: every size is at most 2^24 and every shape at most 2-D.
  const auto count = [this](int64_t layers) {
    ModelConfig c = *this;
    c.n_layers = layers;
    int64_t total = 0;
    for (const TensorSpec& spec : expected_tensors(c)) {
      int64_t n = 1;
      for (int64_t dim : spec.shape) n *= dim;
      total += n;
    }
    return total;
  };
  const int64_t outside = count(0);
  int64_t layers = 0;
  if (__builtin_mul_overflow(n_layers, count(1) - outside, &layers) || layers > kMaxParameters) {
    return kMaxParameters + 1;
  }
  return std::min(outside + layers, kMaxParameters + 1);
}

std::vector<TensorSpec> expected_tensors(const ModelConfig& c) {
  const int64_t d = c.d_model, t = c.max_seq_len;
  std::vector<TensorSpec> specs;
  const auto add = [&](std::string name, std::vector<int64_t> shape) {
    specs.push_back({std::move(name), std::move(shape)});
  };
  const auto add_linear = [&](std::string name, std::vector<int64_t> shape) {
    specs.push_back({std::move(name), std::move(shape), true});
  };
  // A linear layer's weight and, unless the config has none, its bias.
  const auto add_layer = [&](const std::string& name, int64_t out, int64_t in) {
    add_linear(name + ".weight", {out, in});
    if (c.linear_bias) add(name + ".bias", {out});
  };
  add("embed.weight", {c.vocab_size, d});
  if (c.pos_encoding == PosEncoding::Learned) add("pos_embed.weight", {t, d});
  if (c.embed_norm) {
    add("embed_norm.weight", {d});
    add("embed_norm.bias", {d});
  }
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    add(p + "norm1.weight", {d});
    add(p + "norm1.bias", {d});
    add_layer(p + "mixer.query", d, d);
    add_layer(p + "mixer.key", c.key_width(), d);
    add_layer(p + "mixer.value", d, d);
    add_layer(p + "mixer.output", d, d);
    if (c.pos_bias_table()) {
      add(p + "mixer.pos_bias", {t, t});
    } else if (c.mixer == Mixer::Conv) {
      add(p + "mixer.pos_bias", {c.n_heads, c.window});
    } else if (c.mixer == Mixer::Full) {
      add(p + "mixer.pos_u", {t, c.bias_rank});
      add(p + "mixer.pos_v", {t, c.bias_rank});
    } else if (c.mixer == Mixer::Decay) {
      add(p + "mixer.decay", {d});
      add(p + "mixer.bonus", {d});
      if (c.token_shift) {
        add(p + "mixer.shift.query", {d});
        add(p + "mixer.shift.key", {d});
        add(p + "mixer.shift.value", {d});
      }
    }
    add(p + "norm2.weight", {d});
    add(p + "norm2.bias", {d});
    add_layer(p + "ffn.up", c.d_ff, d);
    add_layer(p + "ffn.down", d, c.d_ff);
    if (c.ffn == FeedForward::ChannelMix) {
      add_layer(p + "ffn.gate", d, d);
      add(p + "ffn.shift.up", {d});
      add(p + "ffn.shift.gate", {d});
    }
  }
  add("norm.weight", {d});
  add("norm.bias", {d});
  if (!c.tied_embeddings) add_linear("head.weight", {c.vocab_size, d});
  if (c.head_bias) add("head.bias", {c.vocab_size});
  return specs;
}

}  // namespace aft
