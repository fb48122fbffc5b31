// A request in flight: the scheduler writes its text as it is generated, the HTTP handler reads it
// (all at the end, or piece by piece for a stream). Either side may end it: the scheduler when it
// finishes, the handler when its client goes away (cancel).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <iterator>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tools/cli/prefix_state.h"
#include "tools/server/logprobs.h"
#include "tools/server/request.h"

namespace aft::server {

class Job {
 public:
  Job(uint64_t id, CompletionRequest request) : id(id), request(std::move(request)) {}

  const uint64_t id;
  const CompletionRequest request;
  const std::chrono::steady_clock::time_point created = std::chrono::steady_clock::now();
  // Set by the handler before the job is queued: the longest prefix's state found in the cache
  // shared across replicas (--redis), which the scheduler restores if its own cache has none as
  // long.
  std::optional<cli::PrefixState> shared_prefix;

  // What the scheduler reports once the job is done (read after wait() says done).
  struct Result {
    std::string finish_reason;  // "length", "stop"; empty on error
    std::string error;          // a failure during generation
    std::vector<int32_t> tokens;
    int64_t cached_tokens = 0;
    double queue_ms = 0, prefill_ms = 0, decode_ms = 0;
  };

  // Scheduler side. A token's log-probability (when the request asks) is added before its text.
  void append(const std::string& text);
  void add_logprob(TokenLogprob logprob);
  void finish(Result result);

  // Handler side: waits until there is text (or a log-probability, when logprobs is given) or the
  // job is done (or timeout passes); appends the text written so far to *text and the
  // log-probabilities to *logprobs. Returns true once done and all is taken.
  bool take(std::string* text, std::chrono::milliseconds timeout,
            std::vector<TokenLogprob>* logprobs = nullptr);
  const Result& result() const { return result_; }  // only once take() returned true

  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::string text_;
  std::vector<TokenLogprob> logprobs_;
  bool done_ = false;
  Result result_;
  std::atomic<bool> cancelled_{false};
};

inline void Job::append(const std::string& text) {
  if (text.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  text_ += text;
  changed_.notify_all();
}

inline void Job::add_logprob(TokenLogprob logprob) {
  std::lock_guard<std::mutex> lock(mutex_);
  logprobs_.push_back(std::move(logprob));
  changed_.notify_all();
}

inline void Job::finish(Result result) {
  std::lock_guard<std::mutex> lock(mutex_);
  result_ = std::move(result);
  done_ = true;
  changed_.notify_all();
}

inline bool Job::take(std::string* text, std::chrono::milliseconds timeout,
                      std::vector<TokenLogprob>* logprobs) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, timeout, [&] {
    return done_ || !text_.empty() || (logprobs != nullptr && !logprobs_.empty());
  });
  *text += text_;
  text_.clear();
  if (logprobs != nullptr) {
    std::move(logprobs_.begin(), logprobs_.end(), std::back_inserter(*logprobs));
    logprobs_.clear();
  }
  return done_;
}

}  // namespace aft::server
