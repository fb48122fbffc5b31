#include "model_file.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "crc32.h"
#include "describe.h"
#include "error.h"

namespace aft {
namespace {

using nlohmann::json;

constexpr char kMagic[8] = {'A', 'F', 'T', 'M', 'O', 'D', 'E', 'L'};
constexpr uint64_t kPreambleBytes = 24;
constexpr uint64_t kAlignment = 64;
// Arrays and objects nested deeper are refused while parsing: printing a value (the fingerprint,
// the metadata strings) recurses once per level, and a header of a few hundred thousand '[' would
// overflow the stack. The format itself needs 4 levels (header, tensors, entry, shape).
constexpr int kMaxHeaderDepth = 64;

// Little-endian regardless of the host, and safe at any alignment.
uint64_t load_le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

// Printable ASCII as is, every other byte as \xNN: messages stay clean text whatever the input.
std::string escaped(std::string_view bytes, bool escape_quotes) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char ch : bytes) {
    const auto b = static_cast<uint8_t>(ch);
    const bool quote = escape_quotes && (ch == '"' || ch == '\\');
    if (b >= 0x20 && b < 0x7F && !quote) {
      out += ch;
    } else {
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 0xF];
    }
  }
  return out;
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

std::string range_string(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

// Every message starts with the file's path.
class Validator {
 public:
  Validator(const std::string& path, uint64_t file_size, uint64_t header_end)
      : path_(path), file_size_(file_size), header_end_(header_end) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(AFT_ERR_FORMAT, path_ + ": " + what);
  }

  const json& member(const json& object, const char* key, const std::string& where) const {
    const auto it = object.find(key);
    if (it == object.end()) fail(where + ": missing key " + json_quote(key));
    return *it;
  }

  // JSON integers that do not fit int64 parse as unsigned or as floats; both are handled.
  uint64_t get_u64(const json& value, const std::string& where) const {
    if (value.is_number_unsigned()) return value.get<uint64_t>();
    if (value.is_number_integer() && value.get<int64_t>() >= 0) {
      return static_cast<uint64_t>(value.get<int64_t>());
    }
    fail(where + ": expected a non-negative integer, found " + describe(value));
  }

  TensorInfo parse_tensor(const json& entry, std::size_t index, uint32_t* crc) const {
    const std::string slot = "tensors[" + std::to_string(index) + "]";
    if (!entry.is_object()) fail(slot + ": expected an object, found " + describe(entry));

    TensorInfo info{};
    const json& name = member(entry, "name", slot);
    if (!name.is_string()) fail(slot + ": name: expected a string, found " + describe(name));
    info.name = name.get<std::string>();
    if (info.name.empty()) fail(slot + ": name is empty");
    const std::string where = "tensor " + json_quote(info.name);

    const json& dtype = member(entry, "dtype", where);
    if (!dtype.is_string()) fail(where + ": dtype: expected a string, found " + describe(dtype));
    const std::string& dtype_text = dtype.get_ref<const std::string&>();
    const std::optional<DType> parsed = dtype_from_name(dtype_text);
    if (!parsed) {
      fail(where + ": unsupported dtype " + json_quote(dtype_text) +
           " (this build reads \"f32\", \"bf16\", \"q8_0\")");
    }
    info.dtype = *parsed;

    const json& shape = member(entry, "shape", where);
    if (!shape.is_array()) fail(where + ": shape: expected an array, found " + describe(shape));
    uint64_t elements = 1;
    bool too_large = false;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      const std::string dim_where = where + ": shape[" + std::to_string(i) + "]";
      const uint64_t dim = get_u64(shape[i], dim_where);
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail(dim_where + ": dimension " + std::to_string(dim) + " is too large");
      }
      info.shape.push_back(static_cast<int64_t>(dim));
      // After an overflow, stop multiplying but still validate the remaining dimensions.
      too_large = too_large || __builtin_mul_overflow(elements, dim, &elements);
    }
    if (info.dtype == DType::Q8_0) check_q8_0_shape(info, where);
    const std::optional<uint64_t> expected_bytes =
        too_large ? std::nullopt : stored_bytes(info.dtype, elements);
    if (!expected_bytes) fail(where + ": shape " + shape_string(info.shape) + " is too large");

    info.nbytes = get_u64(member(entry, "nbytes", where), where + ": nbytes");
    if (info.nbytes != *expected_bytes) {
      fail(where + ": nbytes " + std::to_string(info.nbytes) + " does not match shape " +
           shape_string(info.shape) + " of " + dtype_text + " (" + std::to_string(*expected_bytes) +
           ")");
    }

    info.offset = get_u64(member(entry, "offset", where), where + ": offset");
    if (info.offset % kAlignment != 0) {
      fail(where + ": offset " + std::to_string(info.offset) + " is not " +
           std::to_string(kAlignment) + "-byte aligned");
    }
    if (info.offset < header_end_) {
      fail(where + ": offset " + std::to_string(info.offset) + " overlaps the header (bytes " +
           range_string(0, header_end_) + ")");
    }
    if (info.offset > file_size_ || info.nbytes > file_size_ - info.offset) {
      uint64_t end = 0;
      const std::string bytes = __builtin_add_overflow(info.offset, info.nbytes, &end)
                                    ? "bytes [" + std::to_string(info.offset) + ", " +
                                          std::to_string(info.offset) + " + " +
                                          std::to_string(info.nbytes) + ")"
                                    : "bytes " + range_string(info.offset, end);
      fail(where + ": " + bytes + " run past the end of the file (size " +
           std::to_string(file_size_) + ")");
    }

    const json& checksum = member(entry, "crc32", where);
    const uint64_t value = get_u64(checksum, where + ": crc32");
    if (value > std::numeric_limits<uint32_t>::max()) {
      fail(where + ": crc32: expected an integer below 2^32, found " + describe(checksum));
    }
    *crc = static_cast<uint32_t>(value);
    return info;
  }

  // Blocks of 32 along the rows, so that no block crosses a row.
  void check_q8_0_shape(const TensorInfo& info, const std::string& where) const {
    if (info.shape.size() != 2) {
      fail(where + ": dtype \"q8_0\" needs a 2-D shape [rows, cols], found " +
           shape_string(info.shape));
    }
    if (static_cast<uint64_t>(info.shape[1]) % kernels::kQ8BlockSize != 0) {
      fail(where + ": dtype \"q8_0\" needs a column count that is a multiple of " +
           std::to_string(kernels::kQ8BlockSize) + ", found shape " + shape_string(info.shape));
    }
  }

 private:
  const std::string& path_;
  uint64_t file_size_;
  uint64_t header_end_;
};

json parse_header(const Validator& v, const uint8_t* begin, uint64_t length) {
  json header;
  try {
    const auto* first = reinterpret_cast<const char*>(begin);
    header = json::parse(first, first + length, [&v](int depth, json::parse_event_t event, json&) {
      const bool opens =
          event == json::parse_event_t::object_start || event == json::parse_event_t::array_start;
      if (opens && depth >= kMaxHeaderDepth) {
        v.fail("header: arrays and objects nested deeper than " + std::to_string(kMaxHeaderDepth) +
               " levels");
      }
      return true;
    });
  } catch (const json::exception& e) {
    // Drop nlohmann's "[json.exception.parse_error.101] " tag; keep the position and the reason.
    std::string reason = e.what();
    const auto tag_end = reason.find("] ");
    if (reason.rfind("[json.exception.", 0) == 0 && tag_end != std::string::npos) {
      reason.erase(0, tag_end + 2);
    }
    // The reason quotes the offending input, which may be any bytes: keep the message clean text.
    v.fail("header is not valid JSON: " + escaped(reason, false));
  }
  if (!header.is_object()) v.fail("header: expected a JSON object, found " + describe(header));
  for (const char* key : {"config", "tokenizer"}) {
    const json& section = v.member(header, key, "header");
    if (!section.is_object()) {
      v.fail(std::string("header: ") + json_quote(key) + ": expected an object, found " +
             describe(section));
    }
  }
  const json& tensors = v.member(header, "tensors", "header");
  if (!tensors.is_array()) {
    v.fail("header: \"tensors\": expected an array, found " + describe(tensors));
  }
  return header;
}

}  // namespace

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "f32";
    case DType::BF16:
      return "bf16";
    case DType::Q8_0:
      return "q8_0";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const DType dtype : {DType::F32, DType::BF16, DType::Q8_0}) {
    if (name == dtype_name(dtype)) return dtype;
  }
  return std::nullopt;
}

std::optional<uint64_t> stored_bytes(DType dtype, uint64_t elements) {
  uint64_t bytes = 0;
  bool overflow = false;
  switch (dtype) {
    case DType::F32:
      overflow = __builtin_mul_overflow(elements, uint64_t{4}, &bytes);
      break;
    case DType::BF16:
      overflow = __builtin_mul_overflow(elements, uint64_t{2}, &bytes);
      break;
    case DType::Q8_0:  // one int8 per value, one 4-byte scale per block
      overflow = __builtin_add_overflow(elements, elements / kernels::kQ8BlockSize * 4, &bytes);
      break;
  }
  if (overflow) return std::nullopt;
  return bytes;
}

uint64_t TensorInfo::element_count() const {
  uint64_t n = 1;
  for (const int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

const float* TensorInfo::q8_0_scales() const {
  return reinterpret_cast<const float*>(static_cast<const uint8_t*>(data) + element_count());
}

ModelFile ModelFile::open(const std::string& path, bool verify_checksums) {
  return validate(path, MappedFile::open(path), verify_checksums);
}

ModelFile ModelFile::from_memory(const void* data, std::size_t size, const std::string& name,
                                 bool verify_checksums) {
  return validate(name, MappedFile::copy_of(data, size), verify_checksums);
}

ModelFile ModelFile::validate(const std::string& path, MappedFile bytes_of_file,
                              bool verify_checksums) {
  ModelFile file;
  file.path_ = path;
  file.map_ = std::move(bytes_of_file);
  const uint8_t* bytes = file.map_.data();
  const uint64_t size = file.map_.size();

  Validator preamble(path, size, 0);
  if (size < kPreambleBytes) {
    preamble.fail("file is " + std::to_string(size) + " bytes, too small for the " +
                  std::to_string(kPreambleBytes) + "-byte preamble");
  }
  if (std::memcmp(bytes, kMagic, sizeof kMagic) != 0) {
    const std::string found = escaped({reinterpret_cast<const char*>(bytes), 8}, true);
    preamble.fail("bad magic (expected \"AFTMODEL\", found \"" + found +
                  "\"): not an aft model file");
  }
  const auto version = static_cast<uint32_t>(load_le(bytes + 8, 4));
  if (version != kModelFileVersion) {
    preamble.fail("unsupported format version " + std::to_string(version) +
                  " (this build reads version " + std::to_string(kModelFileVersion) + ")");
  }
  const auto reserved = static_cast<uint32_t>(load_le(bytes + 12, 4));
  if (reserved != 0) {
    preamble.fail("reserved preamble field is " + std::to_string(reserved) + " (expected 0)");
  }
  const uint64_t header_length = load_le(bytes + 16, 8);
  if (header_length > size - kPreambleBytes) {
    preamble.fail("header length " + std::to_string(header_length) +
                  " runs past the end of the file (size " + std::to_string(size) + ")");
  }

  const Validator v(path, size, kPreambleBytes + header_length);
  file.header_ = parse_header(v, bytes + kPreambleBytes, header_length);

  const json& entries = file.header_.at("tensors");
  std::vector<uint32_t> checksums(entries.size());
  std::unordered_map<std::string, std::size_t> index_of;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    TensorInfo info = v.parse_tensor(entries[i], i, &checksums[i]);
    const auto [it, inserted] = index_of.emplace(info.name, i);
    if (!inserted) {
      v.fail("duplicate tensor name " + json_quote(info.name) + " (tensors[" +
             std::to_string(it->second) + "] and tensors[" + std::to_string(i) + "])");
    }
    info.data = bytes + info.offset;
    file.tensors_.push_back(std::move(info));
  }

  // Sorted by start, any overlap shows between neighbours; empty tensors occupy no bytes.
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < file.tensors_.size(); ++i) {
    if (file.tensors_[i].nbytes > 0) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    // Ties by index, so the message names the same pair on every platform.
    const uint64_t oa = file.tensors_[a].offset, ob = file.tensors_[b].offset;
    return oa != ob ? oa < ob : a < b;
  });
  for (std::size_t k = 1; k < order.size(); ++k) {
    const TensorInfo& prev = file.tensors_[order[k - 1]];
    const TensorInfo& next = file.tensors_[order[k]];
    if (prev.offset + prev.nbytes > next.offset) {
      v.fail("tensor " + json_quote(next.name) + " overlaps tensor " + json_quote(prev.name) +
             " (bytes " + range_string(next.offset, next.offset + next.nbytes) + " and " +
             range_string(prev.offset, prev.offset + prev.nbytes) + ")");
    }
  }

  if (verify_checksums) {
    for (std::size_t i = 0; i < file.tensors_.size(); ++i) {
      const TensorInfo& t = file.tensors_[i];
      const uint32_t found = crc32(t.data, t.nbytes);
      if (found != checksums[i]) {
        v.fail("tensor " + json_quote(t.name) + ": checksum mismatch (expected crc32 " +
               hex32(checksums[i]) + ", found " + hex32(found) + ")");
      }
    }
  }
  const std::string header_text = file.header_.dump();
  file.fingerprint_ = crc32(header_text.data(), header_text.size());
  return file;
}

uint64_t ModelFile::size_bytes() const { return map_.size(); }

void ModelFile::release(const TensorInfo& tensor) const noexcept {
  map_.release(static_cast<std::size_t>(tensor.offset), static_cast<std::size_t>(tensor.nbytes));
}

const TensorInfo* ModelFile::find(const std::string& name) const {
  for (const TensorInfo& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const nlohmann::json& ModelFile::metadata() const {
  static const nlohmann::json none;
  const auto found = header_.find("metadata");
  return found == header_.end() ? none : *found;
}

std::vector<std::pair<std::string, std::string>> ModelFile::header_strings() const {
  std::vector<std::pair<std::string, std::string>> entries;
  const auto add = [&entries](const std::string& key, const nlohmann::json& value) {
    entries.emplace_back(key, value.is_string() ? value.get<std::string>() : value.dump());
  };
  for (const auto& [key, value] : config().items()) add("config." + key, value);
  add("tokenizer.type", tokenizer().at("type"));
  const auto end_of_text = tokenizer().find("end_of_text");
  if (end_of_text != tokenizer().end()) add("tokenizer.end_of_text", *end_of_text);
  if (metadata().is_object()) {
    for (const auto& [key, value] : metadata().items()) add("metadata." + key, value);
  }
  std::sort(entries.begin(), entries.end());
  return entries;
}

}  // namespace aft
