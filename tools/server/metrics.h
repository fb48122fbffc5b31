// Counters for GET /metrics (Prometheus' text format). Written by the scheduler and the handlers,
// read by the metrics handler: all atomic.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace aft::server {

class PrefixCache;

struct Metrics {
  std::atomic<uint64_t> requests{0}, requests_failed{0};
  std::atomic<uint64_t> prompt_tokens{0}, completion_tokens{0}, cached_tokens{0};
  std::atomic<uint64_t> prefill_tokens{0}, prefill_us{0};  // tokens evaluated: not the cached
  std::atomic<uint64_t> decode_tokens{0}, decode_us{0};    // tokens of the batch steps
  std::atomic<int64_t> queue_depth{0}, active_slots{0};
  // The cache shared across replicas (--redis): lookups that found a state, found none, or
  // failed (Redis unreachable, or left alone after a failure); states written and their bytes;
  // states dropped with the writer's queue full; writes that failed.
  std::atomic<uint64_t> redis_hits{0}, redis_misses{0}, redis_errors{0};
  std::atomic<uint64_t> redis_writes{0}, redis_bytes_written{0}, redis_writes_dropped{0};

  std::string prometheus(const PrefixCache& cache, int slots) const;
};

}  // namespace aft::server
