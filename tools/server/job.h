// A request's choice in flight: the scheduler writes its text as it is generated, the HTTP handler
// reads it (all at the end, or piece by piece for a stream). Either side may end it: the scheduler
// when it finishes, the handler when its client goes away (cancel). A request for several choices
// (n, best_of) is a job each, which share one lock and wake-up (JobSignal), so that their handler
// waits for any of them at once (Job::wait_any).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tools/cli/prefix_state.h"
#include "tools/server/logprobs.h"
#include "tools/server/request.h"

namespace aft::server {

struct JobSignal {
  std::mutex mutex;
  std::condition_variable changed;
};

class Job {
 public:
  Job(uint64_t id, CompletionRequest request, int index = 0,
      std::shared_ptr<JobSignal> signal = std::make_shared<JobSignal>())
      : id(id), index(index), request(std::move(request)), signal_(std::move(signal)) {}

  const uint64_t id;  // the request's: its choices share it
  const int index;    // the choice's, 0 to best_of - 1
  const CompletionRequest request;
  // "request 7", or with several choices "request 7 choice 2": for log lines.
  std::string name() const {
    return "request " + std::to_string(id) +
           (request.best_of > 1 ? " choice " + std::to_string(index) : "");
  }
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
    bool end_of_text = false;  // ended by the model's end-of-text token, which tokens lack
    // The log-probabilities under the raw logits of the tokens and the end of text, summed (only
    // when best_of ranks).
    double logprob_sum = 0;
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
  // Waits until one of jobs, which share a signal, has something for take() (as take() means it)
  // or timeout passes.
  static void wait_any(const std::vector<std::shared_ptr<Job>>& jobs,
                       std::chrono::milliseconds timeout, bool logprobs);

  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

 private:
  bool ready(bool logprobs) const {  // under signal_->mutex
    return done_ || !text_.empty() || (logprobs && !logprobs_.empty());
  }

  const std::shared_ptr<JobSignal> signal_;
  std::string text_;
  std::vector<TokenLogprob> logprobs_;
  bool done_ = false;
  Result result_;
  std::atomic<bool> cancelled_{false};
};

inline void Job::append(const std::string& text) {
  if (text.empty()) return;
  std::lock_guard<std::mutex> lock(signal_->mutex);
  text_ += text;
  signal_->changed.notify_all();
}

inline void Job::add_logprob(TokenLogprob logprob) {
  std::lock_guard<std::mutex> lock(signal_->mutex);
  logprobs_.push_back(std::move(logprob));
  signal_->changed.notify_all();
}

inline void Job::finish(Result result) {
  std::lock_guard<std::mutex> lock(signal_->mutex);
  result_ = std::move(result);
  done_ = true;
  signal_->changed.notify_all();
}

inline bool Job::take(std::string* text, std::chrono::milliseconds timeout,
                      std::vector<TokenLogprob>* logprobs) {
  std::unique_lock<std::mutex> lock(signal_->mutex);
  signal_->changed.wait_for(lock, timeout, [&] { return ready(logprobs != nullptr); });
  *text += text_;
  text_.clear();
  if (logprobs != nullptr) {
    std::move(logprobs_.begin(), logprobs_.end(), std::back_inserter(*logprobs));
    logprobs_.clear();
  }
  return done_;
}

inline void Job::wait_any(const std::vector<std::shared_ptr<Job>>& jobs,
                          std::chrono::milliseconds timeout, bool logprobs) {
  JobSignal& signal = *jobs.front()->signal_;
  std::unique_lock<std::mutex> lock(signal.mutex);
  signal.changed.wait_for(lock, timeout, [&] {
    return std::any_of(jobs.begin(), jobs.end(),
                       [&](const std::shared_ptr<Job>& job) { return job->ready(logprobs); });
  });
}

}  // namespace aft::server
