// The model file container (docs/format.md): memory-mapped, every byte validated before use.
// Knows nothing of AFT: which tensors a model needs is the model definition's business.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "mapped_file.h"

namespace aft {

// The format version this build reads (docs/format.md).
constexpr uint32_t kModelFileVersion = 1;

enum class DType { F32 };

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t offset;
  uint64_t nbytes;
  const void* data;  // inside the mapping, 64-byte aligned
};

class ModelFile {
 public:
  // Throws Error: AFT_ERR_IO if the file cannot be opened or mapped, AFT_ERR_FORMAT for anything
  // malformed (magic, version, header JSON and schema, tensor dtype, bounds, alignment, overlap,
  // checksum); messages start with the path and name the tensor and expected vs found.
  static ModelFile open(const std::string& path, bool verify_checksums);

  const std::string& path() const { return path_; }
  uint64_t size_bytes() const;
  const nlohmann::json& config() const { return header_.at("config"); }
  const nlohmann::json& tokenizer() const { return header_.at("tokenizer"); }
  // The free-form "metadata" object; null when the file has none.
  const nlohmann::json& metadata() const;
  // The header as sorted key/value strings: "config.<key>" for every config key,
  // "tokenizer.type", and "metadata.<key>" for every metadata entry; strings as they are, other
  // values as JSON text.
  std::vector<std::pair<std::string, std::string>> header_strings() const;
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(const std::string& name) const;  // null if absent
  // CRC-32 of the header (config, tokenizer, and every tensor's shape, place and checksum): which
  // model a saved session state belongs to.
  uint32_t fingerprint() const { return fingerprint_; }

 private:
  std::string path_;
  MappedFile map_;
  nlohmann::json header_;
  std::vector<TensorInfo> tensors_;
  uint32_t fingerprint_ = 0;
};

}  // namespace aft
