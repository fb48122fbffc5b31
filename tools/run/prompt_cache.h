// aft-run --prompt-cache FILE: a prompt's tokens and the sequence's state after them, so that a
// later run whose prompt starts with those tokens restores the state and evaluates only the rest
// (an AFT sequence's whole state is kilobytes to megabytes, whatever the prompt's length).
//
// The file: the 8 bytes "AFTPROMP", u32 version 1, u64 token count n, n int32 tokens, u64 state
// size s, s bytes of state as aft_session_state_save writes them (which carry the model's
// fingerprint and a checksum of their own), all little-endian.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "aft.h"

namespace aft::run {

struct PromptCache {
  std::vector<int32_t> tokens;
  std::vector<unsigned char> state;
};

// The cache in `path`; nullopt, with the reason in *why, when the file is absent or is not a
// prompt cache (truncated, another format or version).
std::optional<PromptCache> read_prompt_cache(const std::string& path, std::string* why);

// Writes `tokens` and the session's state to `path` through a temporary file renamed into place,
// so that a reader never sees half a cache. Throws std::runtime_error naming the file.
void write_prompt_cache(const std::string& path, const std::vector<int32_t>& tokens,
                        aft_session* session);

}  // namespace aft::run
