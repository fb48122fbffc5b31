// A store of prefix states shared with other replicas of the server (--redis: RedisCache in
// tools/server/redis_store.h), beside each server's own PrefixCache. The HTTP handlers look it up
// before queueing a request, so that its round trips never stall the scheduler's thread, which
// decodes every stream; the scheduler hands it states to store, without waiting.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "tools/cli/prefix_state.h"

namespace aft::server {

class SharedCache {
 public:
  virtual ~SharedCache() = default;

  // The longest stored state whose tokens are those tokens start with, if it is longer than
  // longer_than tokens (what the local cache has already); nullopt on a miss, and when the store
  // fails (a miss that costs only time). Blocks on the network.
  virtual std::optional<cli::PrefixState> find(const std::vector<int32_t>& tokens,
                                               size_t longer_than) = 0;

  // Queues a copy of the state to be stored; never blocks (the copy is dropped when the queue is
  // full).
  virtual void store(const cli::PrefixState& state) = 0;
};

}  // namespace aft::server
