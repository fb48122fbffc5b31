// The model file container (docs/format.md): memory-mapped, every byte validated before use.
// Knows nothing of AFT: which tensors a model needs is the model definition's business.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/q8_0_block.h"
#include "mapped_file.h"

namespace aft {

// The format version this build reads (docs/format.md).
constexpr uint32_t kModelFileVersion = 1;

// How a tensor's values are stored (docs/format.md, "Tensor data types"): IEEE binary32; the
// upper halves of binary32 values; 8-bit quants in blocks of 32 with one binary32 scale each.
enum class DType { F32, BF16, Q8_0 };

// The name in the header: "f32", "bf16", "q8_0".
const char* dtype_name(DType dtype);
// The dtype of a header name; nullopt for any other name.
std::optional<DType> dtype_from_name(std::string_view name);
// The bytes `elements` values take (q8_0: elements a multiple of kernels::kQ8BlockSize, the quants
// plane then the scales plane); nullopt if that overflows.
std::optional<uint64_t> stored_bytes(DType dtype, uint64_t elements);

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t offset;
  uint64_t nbytes;
  const void* data;  // inside the mapping, 64-byte aligned

  // The product of the shape (1 for a scalar).
  uint64_t element_count() const;
  // A q8_0 tensor's two planes: element_count() int8 quants, row-major, then one scale per block
  // of kernels::kQ8BlockSize consecutive quants (4-byte aligned: whole blocks).
  const int8_t* q8_0_quants() const { return static_cast<const int8_t*>(data); }
  const float* q8_0_scales() const;
};

class ModelFile {
 public:
  // Throws Error: AFT_ERR_IO if the file cannot be opened or mapped, AFT_ERR_FORMAT for anything
  // malformed (magic, version, header JSON and schema, tensor dtype, bounds, alignment, overlap,
  // checksum); messages start with the path and name the tensor and expected vs found.
  static ModelFile open(const std::string& path, bool verify_checksums);
  // The same checks on a private copy of size bytes at data (any alignment; the copy is 64-byte
  // aligned): an image of a model file held in memory. `name` stands for the path in messages.
  static ModelFile from_memory(const void* data, std::size_t size, const std::string& name,
                               bool verify_checksums);

  // The path, or the name given to from_memory.
  const std::string& path() const { return path_; }
  uint64_t size_bytes() const;
  // The whole header as parsed (unknown keys included).
  const nlohmann::json& header() const { return header_; }
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
  // The tensor's bytes will not be read again soon (MappedFile::release): the engine packed them.
  void release(const TensorInfo& tensor) const noexcept;
  // Whether the tensors are read from the file's mapped pages (open), not from a copy
  // (from_memory).
  bool mapped() const { return map_.mapped(); }

 private:
  static ModelFile validate(const std::string& path, MappedFile bytes, bool verify_checksums);

  std::string path_;
  MappedFile map_;
  nlohmann::json header_;
  std::vector<TensorInfo> tensors_;
  uint32_t fingerprint_ = 0;
};

}  // namespace aft
