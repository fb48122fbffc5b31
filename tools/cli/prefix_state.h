// A sequence's state after a prefix of tokens, with the prefix and the logits its last token gave:
// what aft-run's --prompt-cache file holds, and what aft-server keeps in its prefix cache, writes
// to slot files and stores in Redis. Whoever restores one compares the tokens (whatever found it, a
// hash or a file name, only suggests), and aft_session_state_load checks the state itself (the
// model's fingerprint, a checksum).
//
// Encoded: the 8 bytes "AFTPREFX", u32 version 1, u64 token count n, n int32 tokens, u64 logit
// count v (0 where none were kept), v float32 logits, u64 state size s, then s bytes of state as
// aft_session_state_save writes them; all little-endian.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "aft.h"

namespace aft::cli {

struct PrefixState {
  std::vector<int32_t> tokens;
  std::vector<float> logits;
  std::vector<unsigned char> state;
  size_t bytes() const {
    return tokens.size() * sizeof(int32_t) + logits.size() * sizeof(float) + state.size();
  }
};

// The session's state as aft_session_state_save writes it; throws ApiError.
std::vector<unsigned char> save_session_state(const aft_session* session);

std::vector<unsigned char> encode_prefix_state(const PrefixState& prefix);

// nullopt, with the reason in *why, for bytes that are not one encoded record (another format or
// version, truncated, bytes after the state).
std::optional<PrefixState> decode_prefix_state(const unsigned char* data, size_t size,
                                               std::string* why);

// The record in a file; nullopt with the reason when it is absent, unreadable or not a record.
std::optional<PrefixState> read_prefix_state_file(const std::string& path, std::string* why);

// Throws std::runtime_error naming the file where a record written to path would replace
// something else: a file that is not a record (a model or a prompt given by mistake) or not a
// regular file (a device, a pipe). An absent or empty file, or a record of any version, passes.
void check_prefix_state_target(const std::string& path);

// Writes through a temporary file renamed into place, so that a reader never sees half a record;
// checks the target first (above). Returns the bytes written; throws std::runtime_error naming
// the file.
size_t write_prefix_state_file(const std::string& path, const PrefixState& prefix);

}  // namespace aft::cli
