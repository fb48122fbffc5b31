// Builds model files (docs/format.md) for tests: valid ones from a config and tensors,
// random-weight models for any config, and hand-laid images that tests corrupt before writing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace aft::testing {

struct TestTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;  // row-major, as many as the shape holds
};

// A tiny valid config per mixer ("simple", "local", "conv", "full", "decay"; full uses the table
// bias; "decay_shift" is "decay" with token shift):
// vocab 256 (byte tokenizer), d_model 16, 2 layers, d_ff 32, gelu, window 4 (local, conv),
// n_heads 2 (conv), max_seq_len 64, sinusoidal positions, embed_scale 4, untied head with bias.
// Throws std::invalid_argument for another mixer name. Edit the result for other variants.
nlohmann::json tiny_config(const std::string& name);
// tiny_config at d_model 256, d_ff 1024, 6 layers (4.7 M matmul weights): wide enough that every
// op of a call splits its work among threads.
nlohmann::json wide_config(const std::string& name);

nlohmann::json byte_tokenizer();
nlohmann::json char_tokenizer(const std::vector<std::string>& vocab);
// The byte tokenizer for 256 tokens, otherwise a char vocabulary of vocab_size distinct printable
// code points (from U+0021 upwards).
nlohmann::json tokenizer_for(int64_t vocab_size);

// Every tensor expected_tensors() lists for the config, in that order, uniform in [-scale, scale]
// (LayerNorm weights 1 + that). Deterministic: same seed, same values on every platform.
// Throws aft::Error if the config is invalid.
std::vector<TestTensor> random_tensors(const nlohmann::json& config, uint32_t seed,
                                       float scale = 0.1f);

// A model file's parts, laid out but not yet written. Every field is written as is, so a test can
// break exactly one thing: change the preamble fields, edit `header` (e.g. a tensor's "offset"),
// replace the JSON text with `header_text`, or flip bits in `data`.
struct ModelImage {
  std::string magic = "AFTMODEL";
  uint32_t version = 1;
  uint32_t reserved = 0;
  nlohmann::json header;                   // {"config", "tokenizer", "tensors", "metadata"}
  std::optional<std::string> header_text;  // written instead of header.dump() when set
  std::optional<uint64_t> header_length;   // written instead of the header text's length when set
  uint64_t data_start = 0;                 // file offset of data[0]; a multiple of 64
  std::vector<uint8_t> data;               // tensor bytes, little-endian f32

  // Where tensor `name`'s bytes begin in `data` (throws std::out_of_range if there is no such
  // tensor).
  std::size_t data_index(const std::string& name) const;
};

// Tensors in the given order, each at the next 64-byte boundary; checksums computed. header_slack
// bytes of padding after the header leave room for tests to lengthen it without moving the data.
// Throws std::invalid_argument if a tensor's values do not match its shape.
ModelImage layout_model(const nlohmann::json& config, const nlohmann::json& tokenizer,
                        const std::vector<TestTensor>& tensors, uint64_t header_slack = 0);

// Preamble, header text, zero padding up to data_start, data. Throws std::logic_error if the header
// text no longer fits before data_start.
std::vector<uint8_t> to_bytes(const ModelImage& image);
// Throws std::runtime_error if the file cannot be written.
void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes);

// Writes a valid model file; returns path.
std::string write_model_file(const std::string& path, const nlohmann::json& config,
                             const nlohmann::json& tokenizer,
                             const std::vector<TestTensor>& tensors);
// A complete model: tokenizer_for(vocab_size) and random_tensors(config, seed, scale). Returns
// path.
std::string write_random_model(const std::string& path, const nlohmann::json& config,
                               uint32_t seed = 1, float scale = 0.1f);

// A fresh path in the temporary directory (unique per process and call), its file removed when this
// goes away.
class TempFile {
 public:
  explicit TempFile(const std::string& stem = "model");
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace aft::testing
