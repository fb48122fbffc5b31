// The prefix-state cache shared across replicas (--redis), over hiredis. A state is stored as
// cli::encode_prefix_state's bytes under aft:<model fingerprint>:<hash of its tokens>, with SET ...
// EX ttl; a replica of another model never meets it. What a lookup reads back is decoded and its
// tokens compared with the request's: the key only suggests.
//
// Redis being down or slow never fails a request: a lookup that fails is a miss, a write that
// fails is dropped. The first failure is logged and Redis is then left alone for a second at a
// time (a request meanwhile is a miss without a round trip); the first success after an outage is
// logged too: one pair of lines per outage, not one per request. A command Redis refuses (a write
// past its maxmemory, say) is no outage: logged at most once a minute.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tools/server/metrics.h"
#include "tools/server/redis_url.h"
#include "tools/server/shared_cache.h"

namespace aft::server {

class RedisConnection;

class RedisCache final : public SharedCache {
 public:
  struct Settings {
    RedisUrl url;
    int ttl_seconds = 86400;
    uint32_t model_fingerprint = 0;  // aft_model_fingerprint
    // States are written at the end of prompts and completions and every cache_every tokens
    // inside long prompts: lookups try every length down to cache_every tokens below the
    // request's, then the multiples of cache_every.
    size_t cache_every = 2048;
    std::chrono::milliseconds connect_timeout{250}, command_timeout{1000};
    size_t queue_bytes = size_t{64} << 20;  // states waiting to be written: more are dropped
  };

  // Starts the writer's thread and tries to connect (a failure is logged, not thrown).
  RedisCache(Settings settings, Metrics& metrics);
  ~RedisCache() override;  // stops the writer; states still queued are dropped
  RedisCache(const RedisCache&) = delete;
  RedisCache& operator=(const RedisCache&) = delete;

  std::optional<cli::PrefixState> find(const std::vector<int32_t>& tokens,
                                       size_t longer_than) override;
  void store(const cli::PrefixState& state) override;

  // aft:<fingerprint, 8 hex digits>:<hash of the tokens (PrefixCache's), 16 hex digits>.
  std::string key(uint64_t tokens_hash) const;

 private:
  using Clock = std::chrono::steady_clock;
  // An idle connection, or a new one; null while Redis is left alone after a failure.
  std::unique_ptr<RedisConnection> acquire();
  void release(std::unique_ptr<RedisConnection> connection);
  // A connection failed (refused: false), or Redis answered a command with an error.
  void failed(const std::string& why, bool refused);
  void succeeded();
  void write_loop();

  const Settings settings_;
  Metrics& metrics_;

  std::mutex pool_mutex_;
  std::vector<std::unique_ptr<RedisConnection>> idle_;

  std::mutex health_mutex_;
  bool down_ = false;
  Clock::time_point retry_at_;
  std::optional<Clock::time_point> refusal_logged_;

  std::mutex queue_mutex_;
  std::condition_variable queue_changed_;
  std::deque<cli::PrefixState> queue_;
  size_t queued_bytes_ = 0;
  bool stopping_ = false;
  std::thread writer_;
};

}  // namespace aft::server
