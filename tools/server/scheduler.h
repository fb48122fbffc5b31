// Continuous batching. One thread owns the slots (a session each) and loops: admit queued jobs to
// free slots, evaluate one chunk of one new prompt, then advance every generating slot one token
// in a single aft_batch_decode. A new prompt thus delays the others' next token by one chunk at
// most, and each slot's tokens are those it would get alone (batch decode gives each session the
// bits of decoding alone; the prompt's chunks depend only on the prompt and the cache).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "aft.h"
#include "tools/cli/vocabulary.h"
#include "tools/server/job.h"
#include "tools/server/json_grammar.h"
#include "tools/server/logprobs.h"
#include "tools/server/metrics.h"
#include "tools/server/options.h"
#include "tools/server/prefix_cache.h"
#include "tools/server/shared_cache.h"

namespace aft::server {

class Scheduler {
 public:
  // Creates the slots' sessions and warms them up (one prompt and one batch step) before
  // returning; throws cli::ApiError if the engine refuses. States remembered go to shared too
  // (--redis), when given.
  Scheduler(const aft_model* model, const Options& options, Metrics& metrics,
            SharedCache* shared = nullptr);
  ~Scheduler();  // shutdown()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Fails every job in a slot or the queue ("the server is shutting down") and stops the thread;
  // submit() refuses from then on.
  void shutdown();

  // Queues a request's jobs (its choices), all or none; false when the free slots and the queue's
  // room are fewer than the jobs, or after shutdown().
  bool submit(const std::vector<std::shared_ptr<Job>>& jobs);
  const PrefixCache& cache() const { return cache_; }
  int slots() const { return static_cast<int>(slots_.size()); }

  // For /slots (slot_files.h). Each runs on the scheduler's thread between two steps, where no
  // session is in use, and waits for it. A slot's sequence, kept with --slot-save-path: its last
  // request's prompt and completion, the state after them and the last logits. They throw
  // RequestError: 409 for a slot that is processing, 503 once shutting down.
  struct SlotInfo {
    int id;
    bool processing;
    size_t n_tokens;  // the sequence's; while processing, the tokens evaluated so far
  };
  std::vector<SlotInfo> slot_infos();
  // A copy of slot id's sequence; 400 if it holds none.
  cli::PrefixState slot_sequence(int id);
  // Makes sequence slot id's and caches it, so that a prompt starting with its tokens continues
  // from it. Returns why it does not fit this model (its state does not load, its logits are not
  // one per token of the vocabulary...), or "" once done.
  std::string restore_slot(int id, cli::PrefixState sequence);
  // Forgets slot id's sequence; returns its token count.
  size_t erase_slot(int id);

 private:
  struct Slot;
  void run();
  // Starts the admitted jobs, then one prompt chunk and one batch step.
  void step(std::vector<std::pair<Slot*, std::shared_ptr<Job>>>& admitted);
  void start(Slot& slot, std::shared_ptr<Job> job);
  void prefill_chunk(Slot& slot);
  void prompt_done(Slot& slot);
  void emit(Slot& slot, const float* logits);
  // token's log-probability under logits; with the likeliest tokens to the slot's job if it asks.
  double add_logprob(Slot& slot, const float* logits, int32_t token);
  // Pushes token through the slot's detokenizer; the whole characters are in slot.text[0..*length).
  aft_status detokenize(Slot& slot, int32_t token, size_t* length);
  // at_stop_string: the text held for a stop string is dropped, not sent.
  void finish(Slot& slot, const char* reason, bool at_stop_string = false);
  void fail(Slot& slot, const std::string& message);
  void release(Slot& slot);
  bool extend(Slot& slot, const std::string& conversation);
  bool extending(const std::vector<int32_t>& prompt) const;
  // Whether job waits for another's prompt, which begins its own, to be evaluated and cached.
  bool waits_for_prefill(const Job& job,
                         const std::vector<std::pair<Slot*, std::shared_ptr<Job>>>& admitted) const;
  void decode_step();
  void remember(Slot& slot, std::vector<int32_t> tokens, const float* logits);
  // Whether states are kept at all: in the local cache or the shared one.
  bool caching() const { return cache_.enabled() || shared_ != nullptr; }
  void keep_sequence(Slot& slot, const std::vector<int32_t>& tokens);
  // Runs task on the scheduler's thread between two steps and waits; rethrows what it throws.
  void on_thread(const std::function<void()>& task);
  Slot& idle_slot(int id);  // on the thread; 409 if it is processing
  // Ends the queued jobs whose clients went away, so that they hold no place in the queue (under
  // mutex_).
  void drop_cancelled_jobs();

  const aft_model* model_;
  const Options options_;
  Metrics& metrics_;
  int32_t vocab_size_ = 0;
  int64_t max_positions_ = 0;
  PrefixCache cache_;
  SharedCache* const shared_;
  const int32_t end_of_text_;  // the model's token that ends a completion; -1: none
  const cli::Vocabulary vocabulary_;
  const JsonTokenMask json_tokens_;  // response_format's grammar over vocabulary_
  LogprobScorer scorer_;             // logprobs, on the scheduler's thread
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<float> batch_logits_;
  std::vector<float> prompt_logits_;  // a chunk's every row, when a prompt is scored (echo)
  size_t next_prefill_ = 0;           // round robin over prefilling slots

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  // on_thread's tasks
  std::deque<std::function<void()>> controls_;
  int busy_ = 0;  // slots holding a job (under mutex_)
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace aft::server
