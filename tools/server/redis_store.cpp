#include "tools/server/redis_store.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <deque>
#include <initializer_list>
#include <new>
#include <stdexcept>
#include <string_view>

#include "tools/server/prefix_cache.h"

namespace aft::server {

namespace {

// Redis is left alone this long after a failure.
constexpr std::chrono::seconds kRetryAfter{1};
// EXISTS commands sent in one round trip while looking for the longest prefix: a conversation's
// next turn, its new tokens fewer than this, is found in the first.
constexpr size_t kLookupBatch = 256;
// Idle connections kept for the handlers' lookups and the writer.
constexpr size_t kMaxIdle = 16;

// refused: Redis answered with an error (the connection works); otherwise it could not be reached,
// or the connection failed.
struct RedisError : std::runtime_error {
  explicit RedisError(const std::string& what, bool refused = false)
      : std::runtime_error(what), refused(refused) {}
  bool refused;
};

struct FreeReply {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using Reply = std::unique_ptr<redisReply, FreeReply>;

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>(ms.count() % 1000 * 1000);
  return tv;
}

// The lengths a lookup tries, longest first, all longer than longer_than: every length within
// `every` tokens of the request's (where the end of an earlier prompt or completion is, for a
// conversation's next turn), then the multiples of `every` below (the checkpoints of long
// prompts). A stored prefix further below that is not a checkpoint is thus found as the
// checkpoint before it, less than `every` tokens shorter.
std::vector<size_t> candidate_lengths(size_t n, size_t longer_than, size_t every) {
  std::vector<size_t> lengths;
  const size_t window_end = n > every ? n - every : 0;
  for (size_t length = n; length > std::max(window_end, longer_than); --length) {
    lengths.push_back(length);
  }
  for (size_t length = window_end / every * every; length > longer_than; length -= every) {
    lengths.push_back(length);
  }
  return lengths;
}

}  // namespace

// One connection (a hiredis context), authenticated and on its database. Throws RedisError on
// any failure; a connection that threw is discarded, not reused.
class RedisConnection {
 public:
  RedisConnection(const RedisUrl& url, std::chrono::milliseconds connect_timeout,
                  std::chrono::milliseconds command_timeout) {
    const timeval connect = to_timeval(connect_timeout);
    context_.reset(url.socket.empty() ? redisConnectWithTimeout(url.host.c_str(), url.port, connect)
                                      : redisConnectUnixWithTimeout(url.socket.c_str(), connect));
    if (!context_) throw std::bad_alloc();
    if (context_->err != 0) throw RedisError(std::string("cannot connect: ") + context_->errstr);
    if (redisSetTimeout(context_.get(), to_timeval(command_timeout)) != REDIS_OK) {
      throw RedisError(std::string("cannot set the timeout: ") + context_->errstr);
    }
    try {
      if (!url.password.empty() && url.user.empty()) command({"AUTH", url.password});
      if (!url.password.empty() && !url.user.empty()) command({"AUTH", url.user, url.password});
      if (url.db != 0) command({"SELECT", std::to_string(url.db)});
    } catch (const RedisError& e) {  // a wrong password or database: no connection to use
      throw RedisError(e.what());
    }
  }

  // Queues a command; its reply is read by reply() (pipelining: many commands, one round trip).
  void append(std::initializer_list<std::string_view> args) {
    std::vector<const char*> argv;
    std::vector<size_t> lengths;
    for (std::string_view arg : args) {
      argv.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    if (redisAppendCommandArgv(context_.get(), static_cast<int>(argv.size()), argv.data(),
                               lengths.data()) != REDIS_OK) {
      throw RedisError(std::string(*args.begin()) + ": " + context_->errstr);
    }
    commands_.emplace_back(*args.begin());
  }

  // The next reply; an error reply throws, naming its command.
  Reply reply() {
    const std::string command = commands_.empty() ? "a reply" : commands_.front();
    if (!commands_.empty()) commands_.pop_front();
    void* raw = nullptr;
    if (redisGetReply(context_.get(), &raw) != REDIS_OK || raw == nullptr) {
      throw RedisError(command + ": " +
                       (context_->errstr[0] == '\0' ? "the connection failed" : context_->errstr));
    }
    Reply reply(static_cast<redisReply*>(raw));
    if (reply->type == REDIS_REPLY_ERROR) {
      throw RedisError(command + ": " + std::string(reply->str, reply->len), /*refused=*/true);
    }
    return reply;
  }

  Reply command(std::initializer_list<std::string_view> args) {
    append(args);
    return reply();
  }

 private:
  struct FreeContext {
    void operator()(redisContext* context) const { redisFree(context); }
  };
  std::unique_ptr<redisContext, FreeContext> context_;
  std::deque<std::string> commands_;  // those whose replies are still to be read
};

RedisCache::RedisCache(Settings settings, Metrics& metrics)
    : settings_(std::move(settings)), metrics_(metrics) {
  if (std::unique_ptr<RedisConnection> connection = acquire()) {
    release(std::move(connection));
    std::fprintf(stderr,
                 "aft-server: sharing prompt states through Redis at %s (keys aft:%08" PRIx32
                 ":*, expiring after %d s)\n",
                 settings_.url.display().c_str(), settings_.model_fingerprint,
                 settings_.ttl_seconds);
  }
  writer_ = std::thread([this] { write_loop(); });
}

RedisCache::~RedisCache() {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    stopping_ = true;
  }
  queue_changed_.notify_all();
  writer_.join();
}

std::string RedisCache::key(uint64_t tokens_hash) const {
  char key[40];
  std::snprintf(key, sizeof key, "aft:%08" PRIx32 ":%016" PRIx64, settings_.model_fingerprint,
                tokens_hash);
  return key;
}

std::optional<cli::PrefixState> RedisCache::find(const std::vector<int32_t>& tokens,
                                                 size_t longer_than) {
  if (tokens.size() <= longer_than) return std::nullopt;
  std::unique_ptr<RedisConnection> connection = acquire();
  if (!connection) {
    ++metrics_.redis_errors;
    return std::nullopt;
  }
  const std::vector<uint64_t> hashes = prefix_hashes(tokens, tokens.size());
  const std::vector<size_t> lengths =
      candidate_lengths(tokens.size(), longer_than, settings_.cache_every);
  try {
    for (size_t first = 0; first < lengths.size(); first += kLookupBatch) {
      const size_t last = std::min(lengths.size(), first + kLookupBatch);
      for (size_t i = first; i < last; ++i) connection->append({"EXISTS", key(hashes[lengths[i]])});
      std::vector<size_t> found;  // longest first
      for (size_t i = first; i < last; ++i) {
        const Reply exists = connection->reply();
        if (exists->type != REDIS_REPLY_INTEGER) {
          throw RedisError("EXISTS: not an integer reply", /*refused=*/true);
        }
        if (exists->integer == 1) found.push_back(lengths[i]);
      }
      for (size_t length : found) {
        const Reply value = connection->command({"GET", key(hashes[length])});
        if (value->type != REDIS_REPLY_STRING) continue;  // expired or evicted since
        std::string why;
        std::optional<cli::PrefixState> prefix = cli::decode_prefix_state(
            reinterpret_cast<const unsigned char*>(value->str), value->len, &why);
        // The hash only suggests: the tokens decide.
        if (prefix && prefix->tokens.size() == length &&
            std::equal(prefix->tokens.begin(), prefix->tokens.end(), tokens.begin())) {
          release(std::move(connection));
          succeeded();
          ++metrics_.redis_hits;
          return prefix;
        }
      }
    }
  } catch (const RedisError& e) {
    failed(e.what(), e.refused);
    ++metrics_.redis_errors;
    return std::nullopt;
  } catch (const std::bad_alloc&) {  // a record too large to hold now: a miss (replies unread)
    ++metrics_.redis_errors;
    return std::nullopt;
  }
  release(std::move(connection));
  succeeded();
  ++metrics_.redis_misses;
  return std::nullopt;
}

void RedisCache::store(const cli::PrefixState& state) {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    if (stopping_ || queued_bytes_ + state.bytes() > settings_.queue_bytes) {
      ++metrics_.redis_writes_dropped;
      return;
    }
    queue_.push_back(state);
    queued_bytes_ += state.bytes();
  }
  queue_changed_.notify_one();
}

void RedisCache::write_loop() {
  for (;;) {
    cli::PrefixState state;
    {
      std::unique_lock<std::mutex> lock(queue_mutex_);
      queue_changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      state = std::move(queue_.front());
      queue_.pop_front();
      queued_bytes_ -= state.bytes();
    }
    std::unique_ptr<RedisConnection> connection = acquire();
    if (!connection) {
      ++metrics_.redis_errors;
      continue;
    }
    try {
      const std::vector<unsigned char> value = cli::encode_prefix_state(state);
      connection->command(
          {"SET", key(tokens_hash(state.tokens)),
           std::string_view(reinterpret_cast<const char*>(value.data()), value.size()), "EX",
           std::to_string(settings_.ttl_seconds)});
      release(std::move(connection));
      succeeded();
      ++metrics_.redis_writes;
      metrics_.redis_bytes_written += value.size();
    } catch (const RedisError& e) {
      failed(e.what(), e.refused);
      ++metrics_.redis_errors;
    } catch (const std::bad_alloc&) {  // the state is dropped; the connection is fine
      release(std::move(connection));
      ++metrics_.redis_writes_dropped;
    }
  }
}

std::unique_ptr<RedisConnection> RedisCache::acquire() {
  {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    if (!idle_.empty()) {
      std::unique_ptr<RedisConnection> connection = std::move(idle_.back());
      idle_.pop_back();
      return connection;
    }
  }
  {
    std::lock_guard<std::mutex> lock(health_mutex_);
    const Clock::time_point now = Clock::now();
    if (down_ && now < retry_at_) return nullptr;
    if (down_) retry_at_ = now + kRetryAfter;  // one caller tries; the others miss meanwhile
  }
  try {
    return std::make_unique<RedisConnection>(settings_.url, settings_.connect_timeout,
                                             settings_.command_timeout);
  } catch (const RedisError& e) {
    failed(e.what(), e.refused);
    return nullptr;
  }
}

void RedisCache::release(std::unique_ptr<RedisConnection> connection) {
  std::lock_guard<std::mutex> lock(pool_mutex_);
  if (idle_.size() < kMaxIdle) idle_.push_back(std::move(connection));
}

void RedisCache::failed(const std::string& why, bool refused) {
  if (refused) {
    std::lock_guard<std::mutex> lock(health_mutex_);
    const Clock::time_point now = Clock::now();
    if (refusal_logged_ && now - *refusal_logged_ < std::chrono::minutes(1)) return;
    refusal_logged_ = now;
    std::fprintf(stderr, "aft-server: redis at %s refused %s (logged at most once a minute)\n",
                 settings_.url.display().c_str(), why.c_str());
    return;
  }
  {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    idle_.clear();  // connections to a Redis that failed are likely broken too
  }
  std::lock_guard<std::mutex> lock(health_mutex_);
  retry_at_ = Clock::now() + kRetryAfter;
  if (down_) return;
  down_ = true;
  std::fprintf(stderr,
               "aft-server: redis at %s: %s (requests go on with the local cache only until it "
               "answers; tried again every second)\n",
               settings_.url.display().c_str(), why.c_str());
}

void RedisCache::succeeded() {
  std::lock_guard<std::mutex> lock(health_mutex_);
  if (!down_) return;
  down_ = false;
  std::fprintf(stderr, "aft-server: redis at %s answers again\n", settings_.url.display().c_str());
}

}  // namespace aft::server
