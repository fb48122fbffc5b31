#include "tools/quantize/quantize_model.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/format/crc32.h"
#include "engine/format/model_file_layout.h"
#include "models/aft/aft_config.h"
#include "tools/quantize/convert.h"
#include "tools/quantize/output_file.h"

namespace aft::quantize {
namespace {

void refuse_quantized(const ModelFile& in) {
  for (const TensorInfo& t : in.tensors()) {
    if (t.dtype != DType::F32) {
      throw std::runtime_error(in.path() + ": tensor \"" + t.name + "\" is " + dtype_name(t.dtype) +
                               ": already quantized: convert the f32 model");
    }
  }
}

// Writing over the input (or its temporary name) would destroy the mapped file being read. The
// rename would put a regular file in the place of a device, a pipe or a directory, and a pipe
// as the temporary name would block the open.
void refuse_overwriting(const std::string& in_path, const std::string& out_path) {
  const std::string temporary = OutputFile::temporary_path(out_path);
  for (const std::string& target : {out_path, temporary}) {
    std::error_code absent;
    if (std::filesystem::equivalent(in_path, target, absent)) {
      throw std::runtime_error(target + " is the input file " + in_path +
                               ": give another output path");
    }
    // The output through a link to a regular file is fine (the rename replaces the link); the
    // temporary file is opened, so a link there is refused.
    const std::filesystem::file_status status =
        target == temporary ? std::filesystem::symlink_status(target, absent)
                            : std::filesystem::status(target, absent);
    if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
      throw std::runtime_error(target +
                               ": exists and is not a regular file: give another output "
                               "path");
    }
  }
}

}  // namespace

void quantize_model(const std::string& in_path, const std::string& out_path, DType dtype,
                    cli::Progress& progress) {
  progress.show("checking " + in_path);
  const ModelFile in = ModelFile::open(in_path, /*verify_checksums=*/true);
  // An AFT model, not just any container; its config says which tensors are linear weights.
  const ModelConfig config = ModelConfig::from_json(in.config(), in_path);
  std::unordered_set<std::string> linear_weights;
  for (const TensorSpec& spec : expected_tensors(config)) {
    if (spec.linear_weight) linear_weights.insert(spec.name);
  }
  refuse_quantized(in);
  refuse_overwriting(in_path, out_path);

  // Converted tensors get the widest checksum while placing, so that the final header, with the
  // real ones, still fits before the data: the data is written first, the header last.
  nlohmann::json header = in.header();
  nlohmann::json& entries = header.at("tensors");
  std::vector<DType> dtypes;
  for (std::size_t i = 0; i < in.tensors().size(); ++i) {
    const TensorInfo& t = in.tensors()[i];
    dtypes.push_back(stored_dtype(t, linear_weights.count(t.name) != 0, dtype));
    if (dtypes.back() == DType::F32) continue;
    entries[i]["dtype"] = dtype_name(dtypes.back());
    entries[i]["nbytes"] = *stored_bytes(dtypes.back(), t.element_count());
    entries[i]["crc32"] = std::numeric_limits<uint32_t>::max();
  }
  if (!header["metadata"].is_object()) header["metadata"] = nlohmann::json::object();
  header["metadata"]["dtype"] = dtype_name(dtype);
  const uint64_t data_start = place_tensors(header);

  OutputFile out(out_path);
  uint64_t end = data_start;
  for (std::size_t i = 0; i < in.tensors().size(); ++i) {
    const TensorInfo& t = in.tensors()[i];
    progress.show("tensor " + std::to_string(i + 1) + "/" + std::to_string(in.tensors().size()) +
                  ": " + t.name);
    nlohmann::json& entry = entries[i];
    const uint64_t offset = entry.at("offset").get<uint64_t>();
    if (dtypes[i] == DType::F32) {
      out.write_at(offset, t.data, t.nbytes);  // its checksum is verified and stays
    } else {
      const std::vector<uint8_t> bytes = convert(in_path, t, dtypes[i]);
      out.write_at(offset, bytes.data(), bytes.size());
      entry["crc32"] = crc32(bytes.data(), bytes.size());
    }
    end = std::max(end, offset + entry.at("nbytes").get<uint64_t>());
  }

  const std::string text = header.dump();
  if (kModelFilePreambleBytes + text.size() > data_start) {
    throw std::logic_error("aft-quantize: the final header outgrew its place");
  }
  Preamble preamble;
  preamble.header_length = text.size();
  const std::vector<uint8_t> bytes = encode_preamble(preamble);
  out.write_at(0, bytes.data(), bytes.size());
  out.write_at(bytes.size(), text.data(), text.size());
  progress.show("writing " + out_path);
  out.commit(end);
}

}  // namespace aft::quantize
