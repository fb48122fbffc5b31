#include "model_file_writer.h"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "engine/format/crc32.h"
#include "engine/format/model_file_layout.h"
#include "models/aft/aft_config.h"

namespace aft::testing {
namespace {

using nlohmann::json;

std::vector<uint8_t> f32_bytes(const std::vector<float>& values) {
  std::vector<uint8_t> out;
  out.reserve(values.size() * 4);
  for (const float v : values) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(bits >> (8 * i)));
  }
  return out;
}

// splitmix64: tiny, and unlike <random>'s distributions it gives the same floats everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  float uniform() {  // [-1, 1)
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
  }

 private:
  uint64_t state_;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

}  // namespace

json tiny_config(const std::string& name) {
  const bool rwkv4 = name == "rwkv4";  // RWKV-4's block: the decay mixer, channel mixing
  const bool token_shift = name == "decay_shift" || rwkv4;
  const std::string mixer = token_shift ? "decay" : name;
  if (mixer != "simple" && mixer != "local" && mixer != "conv" && mixer != "full" &&
      mixer != "decay") {
    throw std::invalid_argument("tiny_config: unknown mixer " + name);
  }
  const bool windowed = mixer == "local" || mixer == "conv";
  return json{{"vocab_size", 256},
              {"d_model", 16},
              {"n_layers", 2},
              {"d_ff", 32},
              {"activation", rwkv4 ? "relu_squared" : "gelu"},
              {"mixer", mixer},
              {"window", windowed ? 4 : 0},
              {"n_heads", mixer == "conv" ? 2 : 1},
              {"full_bias", "table"},
              {"bias_rank", 0},
              {"max_seq_len", 64},
              {"pos_encoding", "sinusoidal"},
              {"embed_scale", 4.0},
              {"tied_embeddings", false},
              {"head_bias", true},
              {"norm_eps", 1e-5},
              {"token_shift", token_shift},
              {"ffn", rwkv4 ? "channel_mix" : "mlp"},
              {"linear_bias", !rwkv4},
              {"embed_norm", rwkv4}};
}

json wide_config(const std::string& name) {
  json config = tiny_config(name);
  config["d_model"] = 256;
  config["d_ff"] = 1024;
  config["n_layers"] = 6;
  return config;
}

json byte_tokenizer() { return json{{"type", "byte"}}; }

json char_tokenizer(const std::vector<std::string>& vocab) {
  return json{{"type", "char"}, {"vocab", vocab}};
}

json tokenizer_for(int64_t vocab_size) {
  if (vocab_size == 256) return byte_tokenizer();
  std::vector<std::string> vocab;
  for (uint32_t cp = 0x21; static_cast<int64_t>(vocab.size()) < vocab_size; ++cp) {
    const bool invisible = (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD;
    const bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
    if (!invisible && !surrogate) vocab.push_back(utf8(cp));
  }
  return char_tokenizer(vocab);
}

std::vector<TestTensor> random_tensors(const json& config, uint32_t seed, float scale) {
  const ModelConfig parsed = ModelConfig::from_json(config, "random_tensors");
  Rng rng(seed);
  std::vector<TestTensor> tensors;
  for (const TensorSpec& spec : expected_tensors(parsed)) {
    int64_t count = 1;
    for (const int64_t d : spec.shape) count *= d;
    const bool norm_weight = ends_with(spec.name, "norm1.weight") ||
                             ends_with(spec.name, "norm2.weight") || spec.name == "norm.weight";
    TestTensor t{spec.name, spec.shape, std::vector<float>(static_cast<std::size_t>(count))};
    for (float& v : t.values) v = (norm_weight ? 1.0f : 0.0f) + scale * rng.uniform();
    tensors.push_back(std::move(t));
  }
  return tensors;
}

std::size_t ModelImage::data_index(const std::string& name) const {
  for (const json& t : header.at("tensors")) {
    if (t.at("name") == name)
      return static_cast<std::size_t>(t.at("offset").get<uint64_t>() - data_start);
  }
  throw std::out_of_range("ModelImage: no tensor " + name);
}

ModelImage layout_model(const json& config, const json& tokenizer,
                        const std::vector<TestTensor>& tensors, uint64_t header_slack) {
  ModelImage image;
  std::vector<std::vector<uint8_t>> bytes;
  json entries = json::array();
  for (const TestTensor& t : tensors) {
    std::size_t count = 1;
    for (const int64_t d : t.shape) count *= static_cast<std::size_t>(d);
    if (count != t.values.size()) {
      throw std::invalid_argument("layout_model: tensor " + t.name + " has " +
                                  std::to_string(t.values.size()) + " values for " +
                                  std::to_string(count) + " elements");
    }
    bytes.push_back(f32_bytes(t.values));
    entries.push_back({{"name", t.name},
                       {"dtype", "f32"},
                       {"shape", t.shape},
                       {"offset", 0},
                       {"nbytes", bytes.back().size()},
                       {"crc32", crc32(bytes.back().data(), bytes.back().size())}});
  }
  image.header = json{{"config", config},
                      {"tokenizer", tokenizer},
                      {"tensors", std::move(entries)},
                      {"metadata", {{"producer", "aft tests"}}}};
  image.data_start = place_tensors(image.header, header_slack);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    image.data.resize(image.header["tensors"][i]["offset"].get<uint64_t>() - image.data_start);
    image.data.insert(image.data.end(), bytes[i].begin(), bytes[i].end());
  }
  return image;
}

std::vector<uint8_t> to_bytes(const ModelImage& image) {
  const std::string text = image.header_text ? *image.header_text : image.header.dump();
  std::vector<uint8_t> out =
      encode_preamble({image.magic, image.version, image.reserved,
                       image.header_length ? *image.header_length : text.size()});
  out.insert(out.end(), text.begin(), text.end());
  if (out.size() > image.data_start) {
    throw std::logic_error(
        "to_bytes: the header runs past data_start; give layout_model more "
        "header_slack");
  }
  out.resize(image.data_start, 0);
  out.insert(out.end(), image.data.begin(), image.data.end());
  return out;
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  file.close();
  if (!file) throw std::runtime_error("write_bytes: cannot write " + path);
}

std::string write_model_file(const std::string& path, const json& config, const json& tokenizer,
                             const std::vector<TestTensor>& tensors) {
  write_bytes(path, to_bytes(layout_model(config, tokenizer, tensors)));
  return path;
}

std::string write_random_model(const std::string& path, const json& config, uint32_t seed,
                               float scale) {
  std::vector<TestTensor> tensors = random_tensors(config, seed, scale);  // validates config
  const json tokenizer = tokenizer_for(config.at("vocab_size").get<int64_t>());
  return write_model_file(path, config, tokenizer, tensors);
}

TempFile::TempFile(const std::string& stem) {
  static std::atomic<unsigned> counter{0};
  const std::string name =
      "aft_" + stem + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".aft";
  path_ = (std::filesystem::temp_directory_path() / name).string();
}

TempFile::~TempFile() {
  std::error_code ignored;
  std::filesystem::remove(path_, ignored);
}

}  // namespace aft::testing
