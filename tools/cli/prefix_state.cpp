#include "tools/cli/prefix_state.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "tools/cli/api_call.h"

namespace aft::cli {
namespace {

constexpr char kMagic[8] = {'A', 'F', 'T', 'P', 'R', 'E', 'F', 'X'};
constexpr uint32_t kVersion = 1;

template <class T>
void put(std::vector<unsigned char>& out, T value) {
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // the formats are little-endian, as the machines are
  out.insert(out.end(), bytes, bytes + sizeof(T));
}

// Reads values off the record's bytes, refusing to read past their end.
class Reader {
 public:
  Reader(const unsigned char* data, size_t size) : data_(data), size_(size) {}
  bool bytes(void* to, uint64_t n) {
    if (n > size_ - at_) return false;
    if (n > 0) std::memcpy(to, data_ + at_, static_cast<size_t>(n));
    at_ += static_cast<size_t>(n);
    return true;
  }
  template <class T>
  bool value(T* to) {
    return bytes(to, sizeof(T));
  }
  // A count of items of `item` bytes that fit in what is left, or false.
  bool count(uint64_t* n, size_t item) { return value(n) && *n <= (size_ - at_) / item; }
  uint64_t left() const { return size_ - at_; }

 private:
  const unsigned char* data_;
  size_t size_;
  size_t at_ = 0;
};

}  // namespace

std::vector<unsigned char> save_session_state(const aft_session* session) {
  std::vector<unsigned char> state(aft_session_state_size(session));
  check(aft_session_state_save(session, state.data(), state.size(), nullptr),
        "saving the sequence's state");
  return state;
}

std::vector<unsigned char> encode_prefix_state(const PrefixState& prefix) {
  std::vector<unsigned char> out(kMagic, kMagic + sizeof kMagic);
  out.reserve(sizeof kMagic + 28 + prefix.bytes());
  put<uint32_t>(out, kVersion);
  put<uint64_t>(out, prefix.tokens.size());
  for (int32_t token : prefix.tokens) put<int32_t>(out, token);
  put<uint64_t>(out, prefix.logits.size());
  for (float logit : prefix.logits) put<float>(out, logit);
  put<uint64_t>(out, prefix.state.size());
  out.insert(out.end(), prefix.state.begin(), prefix.state.end());
  return out;
}

std::optional<PrefixState> decode_prefix_state(const unsigned char* data, size_t size,
                                               std::string* why) {
  Reader r(data, size);
  char magic[8];
  uint32_t version = 0;
  if (!r.bytes(magic, sizeof magic) || std::memcmp(magic, kMagic, sizeof magic) != 0) {
    *why = "not a saved prefix state of aft";
    return std::nullopt;
  }
  if (!r.value(&version) || version != kVersion) {
    *why = "prefix state version " + std::to_string(version) + ", expected " +
           std::to_string(kVersion);
    return std::nullopt;
  }
  PrefixState prefix;
  uint64_t n = 0;
  if (!r.count(&n, sizeof(int32_t))) {
    *why = "truncated (its token count runs past the end)";
    return std::nullopt;
  }
  prefix.tokens.resize(static_cast<size_t>(n));
  r.bytes(prefix.tokens.data(), n * sizeof(int32_t));
  if (!r.count(&n, sizeof(float))) {
    *why = "truncated (its logit count runs past the end)";
    return std::nullopt;
  }
  prefix.logits.resize(static_cast<size_t>(n));
  r.bytes(prefix.logits.data(), n * sizeof(float));
  if (!r.value(&n) || n != r.left()) {
    *why = "truncated or with bytes after its state";
    return std::nullopt;
  }
  prefix.state.resize(static_cast<size_t>(n));
  r.bytes(prefix.state.data(), n);
  return prefix;
}

std::optional<PrefixState> read_prefix_state_file(const std::string& path, std::string* why) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status)) {
    *why = "no such file";
    return std::nullopt;
  }
  if (!std::filesystem::is_regular_file(status)) {
    *why = "not a regular file";
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  std::vector<unsigned char> bytes;
  if (in) bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>{});
  if (!in || in.bad()) {
    *why = "cannot read it";
    return std::nullopt;
  }
  return decode_prefix_state(bytes.data(), bytes.size(), why);
}

void check_prefix_state_target(const std::string& path) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status)) return;
  if (!std::filesystem::is_regular_file(status)) {
    throw std::runtime_error(path + ": not a regular file: a prefix state is not written over it");
  }
  std::ifstream in(path, std::ios::binary);
  char magic[sizeof kMagic];
  in.read(magic, sizeof magic);
  const std::streamsize got = in.gcount();
  if (got == 0 && in.eof()) return;  // empty: nothing to lose
  if (got != static_cast<std::streamsize>(sizeof magic) ||
      std::memcmp(magic, kMagic, sizeof magic) != 0) {
    throw std::runtime_error(path +
                             ": exists and is not a prefix state of aft (a model or a prompt "
                             "given by mistake?): a prefix state is not written over it");
  }
}

size_t write_prefix_state_file(const std::string& path, const PrefixState& prefix) {
  check_prefix_state_target(path);
  const std::vector<unsigned char> bytes = encode_prefix_state(prefix);
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file.write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    file.flush();
    if (!file) {
      const std::string reason = std::strerror(errno);
      std::remove(temporary.c_str());
      throw std::runtime_error(path + ": cannot write the prefix state: " + reason);
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::remove(temporary.c_str());
    throw std::runtime_error(path + ": cannot write the prefix state: " + error.message());
  }
  return bytes.size();
}

}  // namespace aft::cli
