#include "tools/run/prompt_cache.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "tools/cli/api_call.h"

namespace aft::run {
namespace {

constexpr char kMagic[8] = {'A', 'F', 'T', 'P', 'R', 'O', 'M', 'P'};
constexpr uint32_t kVersion = 1;

template <class T>
void put(std::vector<unsigned char>& out, T value) {
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // the formats are little-endian, as the machines are
  out.insert(out.end(), bytes, bytes + sizeof(T));
}

// Reads values off the file's bytes, refusing to read past their end.
class Reader {
 public:
  explicit Reader(const std::vector<unsigned char>& bytes) : bytes_(bytes) {}
  bool bytes(void* to, uint64_t n) {
    if (n > bytes_.size() - at_) return false;
    if (n > 0) std::memcpy(to, bytes_.data() + at_, static_cast<std::size_t>(n));
    at_ += static_cast<std::size_t>(n);
    return true;
  }
  template <class T>
  bool value(T* to) {
    return bytes(to, sizeof(T));
  }
  uint64_t left() const { return bytes_.size() - at_; }

 private:
  const std::vector<unsigned char>& bytes_;
  std::size_t at_ = 0;
};

}  // namespace

std::optional<PromptCache> read_prompt_cache(const std::string& path, std::string* why) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    *why = "no such file yet";
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  std::vector<unsigned char> bytes;
  if (in) bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>{});
  if (!in || in.bad()) {
    *why = "cannot read it";
    return std::nullopt;
  }
  Reader r(bytes);
  char magic[8];
  uint32_t version = 0;
  uint64_t n_tokens = 0;
  if (!r.bytes(magic, sizeof magic) || std::memcmp(magic, kMagic, sizeof magic) != 0) {
    *why = "not a prompt cache of aft-run";
    return std::nullopt;
  }
  if (!r.value(&version) || version != kVersion) {
    *why = "prompt cache version " + std::to_string(version) + ", expected " +
           std::to_string(kVersion);
    return std::nullopt;
  }
  PromptCache cache;
  if (!r.value(&n_tokens) || n_tokens > r.left() / sizeof(int32_t)) {
    *why = "truncated (its token count runs past the end)";
    return std::nullopt;
  }
  cache.tokens.resize(static_cast<std::size_t>(n_tokens));
  uint64_t state_size = 0;
  if (!r.bytes(cache.tokens.data(), n_tokens * sizeof(int32_t)) || !r.value(&state_size) ||
      state_size != r.left()) {
    *why = "truncated or with bytes after its state";
    return std::nullopt;
  }
  cache.state.resize(static_cast<std::size_t>(state_size));
  r.bytes(cache.state.data(), state_size);
  return cache;
}

void write_prompt_cache(const std::string& path, const std::vector<int32_t>& tokens,
                        aft_session* session) {
  std::vector<unsigned char> out(kMagic, kMagic + sizeof kMagic);
  put<uint32_t>(out, kVersion);
  put<uint64_t>(out, tokens.size());
  for (int32_t token : tokens) put<int32_t>(out, token);
  const std::size_t state_size = aft_session_state_size(session);
  put<uint64_t>(out, state_size);
  const std::size_t at = out.size();
  out.resize(at + state_size);
  cli::check(aft_session_state_save(session, out.data() + at, state_size, nullptr),
             "saving the prompt cache's state");

  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
    file.flush();
    if (!file) {
      const std::string reason = std::strerror(errno);
      std::remove(temporary.c_str());
      throw std::runtime_error(path + ": cannot write the prompt cache: " + reason);
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::remove(temporary.c_str());
    throw std::runtime_error(path + ": cannot write the prompt cache: " + error.message());
  }
}

}  // namespace aft::run
