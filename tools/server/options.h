// aft-server's command line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "aft.h"
#include "tools/cli/model_flags.h"
#include "tools/server/redis_url.h"

namespace aft::server {

struct Options {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8080;
  int parallel = 4;     // slots: requests generating at once
  int max_queue = 64;   // requests waiting for a slot before new ones get 503
  int threads = 0;      // the sessions' n_threads; 0 = the physical cores
  std::string api_key;  // empty: no authorization
  size_t state_cache_bytes = size_t{256} << 20;
  size_t max_body_bytes = size_t{1} << 20;
  // Prompt tokens evaluated between two decode steps. Above 64 a narrow model's prefill runs as a
  // parallel scan: chunks of 64 took 1.85x the time of 128 or 256 on 2 cores (docs/server.md).
  int prefill_chunk = 128;
  // Inside a long prompt, the state is also cached each time the prefill passes a multiple of
  // this many tokens: a prompt that shares a long beginning with an earlier one but ends
  // otherwise evaluates only from the last checkpoint on.
  int cache_every = 2048;
  // A built-in's name or a JSON object (tools/server/chat_template.h); empty: the model's own,
  // else "plain".
  std::string chat_template;
  // The state cache shared across replicas (tools/server/redis_store.h), and how long a state
  // stays there after it is written.
  std::optional<RedisUrl> redis;
  int redis_ttl = 86400;
  // POST /slots/{id}?action=save|restore|erase reads and writes files here; empty: refused (501).
  std::string slot_save_path;
  int timeout_seconds = 600;  // HTTP read and write timeouts, as llama-server's --timeout
  cli::ModelFlags load;       // --no-checksum, --matmul-precision, --no-mmap
  bool verbose = false;
};

extern const char kUsage[];

// Returns nullopt for --help; throws cli::UsageError on bad usage.
std::optional<Options> parse_options(int argc, char** argv);

}  // namespace aft::server
