#include "tools/server/metrics.h"

#include <sstream>

#include "tools/server/prefix_cache.h"

namespace aft::server {

namespace {

void metric(std::ostringstream& out, const char* name, const char* type, const char* help,
            double value) {
  out << "# HELP aft_" << name << ' ' << help << "\n# TYPE aft_" << name << ' ' << type << "\naft_"
      << name << ' ' << value << '\n';
}

double per_second(uint64_t tokens, uint64_t us) { return us == 0 ? 0.0 : tokens * 1e6 / us; }

}  // namespace

std::string Metrics::prometheus(const PrefixCache& cache, int slots) const {
  std::ostringstream out;
  out.precision(10);
  metric(out, "requests_total", "counter", "Completion requests answered.", requests);
  metric(out, "requests_failed_total", "counter", "Completion requests refused or failed.",
         requests_failed);
  metric(out, "prompt_tokens_total", "counter", "Prompt tokens of the requests.", prompt_tokens);
  metric(out, "completion_tokens_total", "counter", "Tokens generated.", completion_tokens);
  metric(out, "cached_tokens_total", "counter", "Prompt tokens restored from the state cache.",
         cached_tokens);
  metric(out, "prefill_tokens_total", "counter", "Prompt tokens evaluated.", prefill_tokens);
  metric(out, "prefill_seconds_total", "counter", "Time evaluating prompts.", prefill_us * 1e-6);
  metric(out, "prefill_tokens_per_second", "gauge", "Prompt tokens evaluated per second so far.",
         per_second(prefill_tokens, prefill_us));
  metric(out, "decode_tokens_total", "counter", "Tokens decoded in batch steps.", decode_tokens);
  metric(out, "decode_seconds_total", "counter", "Time in batch decode steps.", decode_us * 1e-6);
  metric(out, "decode_tokens_per_second", "gauge", "Tokens decoded per second so far.",
         per_second(decode_tokens, decode_us));
  metric(out, "cache_hits_total", "counter", "Requests that restored a cached state.", cache.hits);
  metric(out, "cache_misses_total", "counter", "Requests that found no cached state.",
         cache.misses);
  metric(out, "cache_bytes", "gauge", "Bytes held by the state cache.", cache.bytes_used);
  metric(out, "cache_entries", "gauge", "States held by the state cache.", cache.entries);
  metric(out, "redis_hits_total", "counter",
         "Lookups in Redis (--redis) that found a longer prefix's state.", redis_hits);
  metric(out, "redis_misses_total", "counter", "Lookups in Redis that found none.", redis_misses);
  metric(out, "redis_errors_total", "counter",
         "Lookups and writes that failed, Redis unreachable or refusing (a miss, a dropped write).",
         redis_errors);
  metric(out, "redis_writes_total", "counter", "States written to Redis.", redis_writes);
  metric(out, "redis_bytes_written_total", "counter", "Bytes of the states written to Redis.",
         redis_bytes_written);
  metric(out, "redis_writes_dropped_total", "counter",
         "States not written to Redis: the writer's queue was full.", redis_writes_dropped);
  metric(out, "queue_depth", "gauge", "Requests waiting for a slot.", queue_depth);
  metric(out, "active_slots", "gauge", "Slots generating.", active_slots);
  metric(out, "slots", "gauge", "Slots (--parallel).", slots);
  return out.str();
}

}  // namespace aft::server
