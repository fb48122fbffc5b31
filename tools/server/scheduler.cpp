#include "tools/server/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <future>
#include <new>
#include <optional>
#include <string>

#include "tools/cli/api_call.h"
#include "tools/cli/elapsed.h"
#include "tools/server/stop_filter.h"

namespace aft::server {

namespace {

using cli::Clock;
using cli::ms_since;

std::string failure(const char* doing, aft_status status) {
  return std::string(doing) + ": " + aft_status_string(status) + ": " + aft_last_error();
}

}  // namespace

struct Scheduler::Slot {
  // kExtend: after a chat's answer, evaluating the conversation as its next turn will send it.
  enum class Phase { kFree, kPrefill, kDecode, kExtend };
  cli::Session session;
  cli::Detokenizer detokenizer;
  cli::Sampler sampler;
  std::shared_ptr<Job> job;
  Phase phase = Phase::kFree;
  size_t prefilled = 0;  // prompt tokens in the session's state
  std::unique_ptr<StopFilter> stop;
  Job::Result result;
  std::vector<float> logits;
  std::vector<char> text = std::vector<char>(64);
  int64_t characters = 0;  // of the prompt and completion so far, with logprobs: text_offset
  Clock::time_point prefill_start;
  std::optional<JsonGrammar> json;  // response_format: the JSON written so far
  std::vector<float> allowed;       // the logits, the tokens JSON refuses at -inf
  cli::PrefixState sequence;        // for /slots; no tokens: none
  std::string answer;               // the text the client got
  std::vector<int32_t> extension;   // kExtend's tokens
};

Scheduler::Scheduler(const aft_model* model, const Options& options, Metrics& metrics,
                     SharedCache* shared)
    : model_(model),
      options_(options),
      metrics_(metrics),
      cache_(options.state_cache_bytes),
      shared_(shared),
      end_of_text_(aft_model_end_of_text(model)),
      vocabulary_(model, "the model"),
      json_tokens_(vocabulary_.texts(), end_of_text_),
      scorer_(vocabulary_) {
  aft_model_info info;
  cli::check(aft_model_get_info(model, &info), "reading the model");
  vocab_size_ = info.vocab_size;
  max_positions_ = info.max_positions;
  aft_session_params params = aft_session_default_params();
  params.n_threads = options.threads;
  for (int i = 0; i < options.parallel; ++i) {
    auto slot = std::make_unique<Slot>();
    aft_session* session = nullptr;
    cli::check(aft_session_create(model, &params, &session), "creating a session");
    slot->session.reset(session);
    aft_detokenizer* detokenizer = nullptr;
    cli::check(aft_detokenizer_create(model, &detokenizer), "creating a detokenizer");
    slot->detokenizer.reset(detokenizer);
    slot->logits.resize(static_cast<size_t>(vocab_size_));
    slots_.push_back(std::move(slot));
  }
  batch_logits_.resize(slots_.size() * static_cast<size_t>(vocab_size_));

  // Warm up: the first calls size the sessions' buffers and start the thread team.
  std::vector<aft_session*> sessions;
  std::vector<int32_t> tokens(slots_.size(), 0);
  for (auto& slot : slots_) {
    const int32_t prompt[2] = {0, 0};
    cli::check(
        aft_session_eval(slot->session.get(), prompt, 2, AFT_LOGITS_LAST, slot->logits.data()),
        "warming up (a prompt)");
    sessions.push_back(slot->session.get());
  }
  cli::check(aft_batch_decode(sessions.data(), tokens.data(), sessions.size(), AFT_LOGITS_LAST,
                              batch_logits_.data()),
             "warming up (a batch step)");
  for (auto& slot : slots_) aft_session_reset(slot->session.get());

  thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() { shutdown(); }

void Scheduler::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Scheduler::drop_cancelled_jobs() {
  // One pass that keeps the others in order (run() calls it every step: no allocation).
  auto kept = queue_.begin();
  for (std::shared_ptr<Job>& job : queue_) {
    if (!job->cancelled()) {
      *kept++ = std::move(job);
      continue;
    }
    // No handler is left to log it.
    std::fprintf(stderr, "aft-server: %s cancelled (the client went away) while queued\n",
                 job->name().c_str());
    Job::Result result;
    result.error = "cancelled";
    job->finish(std::move(result));
  }
  queue_.erase(kept, queue_.end());
  metrics_.queue_depth = static_cast<int64_t>(queue_.size());
}

bool Scheduler::submit(const std::vector<std::shared_ptr<Job>>& jobs) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    drop_cancelled_jobs();
    const size_t free_slots = slots_.size() - static_cast<size_t>(busy_);
    if (stopping_ ||
        queue_.size() + jobs.size() > free_slots + static_cast<size_t>(options_.max_queue)) {
      return false;
    }
    queue_.insert(queue_.end(), jobs.begin(), jobs.end());
    metrics_.queue_depth = static_cast<int64_t>(queue_.size());
  }
  wake_.notify_all();
  return true;
}

void Scheduler::run() {
  for (;;) {
    std::vector<std::pair<Slot*, std::shared_ptr<Job>>> admitted;
    std::deque<std::function<void()>> controls;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock,
                 [&] { return stopping_ || busy_ > 0 || !queue_.empty() || !controls_.empty(); });
      if (stopping_) break;
      controls.swap(controls_);
      drop_cancelled_jobs();
      // To each free slot the first queued job that may start (one that waits lets those behind
      // it pass).
      for (auto& slot : slots_) {
        if (slot->phase != Slot::Phase::kFree) continue;
        const auto next = std::find_if(queue_.begin(), queue_.end(), [&](const auto& job) {
          return !extending(job->request.prompt) && !waits_for_prefill(*job, admitted);
        });
        if (next == queue_.end()) break;
        std::shared_ptr<Job> job = std::move(*next);
        queue_.erase(next);
        slot->phase = Slot::Phase::kPrefill;  // reserved; start() below fills it in
        ++busy_;
        admitted.emplace_back(slot.get(), std::move(job));
      }
      metrics_.queue_depth = static_cast<int64_t>(queue_.size());
    }
    for (auto& task : controls) task();  // before the admitted start: they count as processing
    try {
      step(admitted);
    } catch (const std::exception& e) {  // out of memory, say: the jobs in flight fail, not all
      const std::string message = std::string("internal error: ") + e.what();
      for (auto& [slot, job] : admitted) {
        if (!job) continue;  // started (moved into its slot)
        Job::Result result;
        result.error = message;
        job->finish(std::move(result));
        slot->phase = Slot::Phase::kFree;
        std::lock_guard<std::mutex> lock(mutex_);
        --busy_;
      }
      for (auto& slot : slots_) {
        if (slot->phase == Slot::Phase::kExtend) release(*slot);
        if (slot->phase != Slot::Phase::kFree && slot->job) fail(*slot, message);
      }
    }
  }
  // Shutting down: nobody waits in vain.
  for (auto& slot : slots_) {
    if (slot->phase == Slot::Phase::kExtend) release(*slot);
    if (slot->phase != Slot::Phase::kFree) fail(*slot, "the server is shutting down");
  }
  std::deque<std::function<void()>> controls;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    controls.swap(controls_);  // on_thread refuses new ones from now on
  }
  for (auto& task : controls) task();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& job : queue_) {
    Job::Result result;
    result.error = "the server is shutting down";
    job->finish(std::move(result));
  }
  queue_.clear();
}

void Scheduler::step(std::vector<std::pair<Slot*, std::shared_ptr<Job>>>& admitted) {
  for (auto& [slot, job] : admitted) start(*slot, std::move(job));
  for (auto& slot : slots_) {
    if (slot->job && slot->job->cancelled()) fail(*slot, "cancelled");
  }
  // One chunk of one prompt, taking the prefilling slots in turn.
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = *slots_[(next_prefill_ + i) % slots_.size()];
    if (slot.phase == Slot::Phase::kPrefill || slot.phase == Slot::Phase::kExtend) {
      next_prefill_ = (next_prefill_ + i + 1) % slots_.size();
      prefill_chunk(slot);
      break;
    }
  }
  decode_step();
}

void Scheduler::start(Slot& slot, std::shared_ptr<Job> job) {
  slot.job = std::move(job);
  slot.result = Job::Result{};
  slot.result.queue_ms = ms_since(slot.job->created);
  slot.answer.clear();
  slot.prefill_start = Clock::now();
  ++metrics_.active_slots;
  const CompletionRequest& request = slot.job->request;

  aft_sampler_params params = request.sampling;
  params.logit_bias = request.logit_bias.data();
  params.n_logit_bias = request.logit_bias.size();
  aft_sampler* sampler = nullptr;
  aft_status status = aft_sampler_create(&params, &sampler);
  slot.sampler.reset(sampler);
  if (status != AFT_OK) return fail(slot, failure("creating the sampler", status));
  // The prompt counts among the recent tokens the penalties look at, as in aft-run.
  for (int32_t token : request.prompt) aft_sampler_accept(slot.sampler.get(), token);
  slot.stop = std::make_unique<StopFilter>(request.stop);
  slot.json.reset();
  if (request.json_schema) slot.json.emplace(*request.json_schema);
  slot.characters = 0;
  if (request.prompt_logprobs()) {  // the prompt's first token; prefill_chunk scores the others
    TokenLogprob first;
    first.chosen.text = vocabulary_.text(request.prompt[0]);
    first.scored = false;
    slot.characters = cli::code_points_starting(first.chosen.text);
    slot.job->add_logprob(std::move(first));
  } else if (request.top_logprobs >= 0) {
    for (int32_t token : request.prompt) {
      slot.characters += cli::code_points_starting(vocabulary_.text(token));
    }
  }
  if (request.echo) {  // the prompt's text, past the stop strings (they end the completion only)
    std::string text;
    for (int32_t token : request.prompt) {
      size_t length = 0;
      status = detokenize(slot, token, &length);
      if (status != AFT_OK) return fail(slot, failure("decoding the prompt", status));
      text.append(slot.text.data(), length);
    }
    slot.job->append(text);
  }

  slot.prefilled = 0;
  // The prompt's log-probabilities need the logits of every position: no cached state serves.
  const PrefixCache::Entry* hit =
      request.prompt_logprobs() ? nullptr
                                : cache_.longest_prefix(request.prompt, request.prompt.size());
  std::optional<cli::PrefixState>& shared = slot.job->shared_prefix;
  if (shared && !request.prompt_logprobs() &&
      (hit == nullptr || shared->tokens.size() > hit->tokens.size()) &&
      shared->tokens.size() <= request.prompt.size() &&
      std::equal(shared->tokens.begin(), shared->tokens.end(), request.prompt.begin()) &&
      shared->logits.size() == static_cast<size_t>(vocab_size_) &&
      aft_session_state_load(slot.session.get(), shared->state.data(), shared->state.size()) ==
          AFT_OK) {
    // Found in Redis by the handler: kept here too, for this replica's next requests.
    slot.prefilled = shared->tokens.size();
    slot.logits = shared->logits;
    cache_.insert(std::move(*shared));  // (hit is not used past here: the insert may evict it)
  } else if (hit != nullptr && aft_session_state_load(slot.session.get(), hit->state.data(),
                                                      hit->state.size()) == AFT_OK) {
    slot.prefilled = hit->tokens.size();
    slot.logits = hit->logits;
  } else {
    aft_session_reset(slot.session.get());
  }
  shared.reset();
  slot.result.cached_tokens = static_cast<int64_t>(slot.prefilled);
  if (options_.verbose) {
    std::fprintf(stderr,
                 "aft-server: %s: %zu prompt tokens, %zu from the cache, seed %llu, "
                 "temperature %g, top_k %d, top_p %g, min_p %g\n",
                 slot.job->name().c_str(), request.prompt.size(), slot.prefilled,
                 static_cast<unsigned long long>(request.sampling.seed),
                 request.sampling.temperature, request.sampling.top_k, request.sampling.top_p,
                 request.sampling.min_p);
  }
  slot.phase = Slot::Phase::kPrefill;
  if (slot.prefilled == request.prompt.size()) prompt_done(slot);
}

void Scheduler::prefill_chunk(Slot& slot) {
  const bool is_extension = slot.phase == Slot::Phase::kExtend;
  const std::vector<int32_t>& prompt = is_extension ? slot.extension : slot.job->request.prompt;
  // A chunk ends at the next multiple of --cache-every, where the state is cached.
  const size_t every = static_cast<size_t>(options_.cache_every);
  const size_t to_checkpoint = every - slot.prefilled % every;
  size_t n = std::min(
      {prompt.size() - slot.prefilled, static_cast<size_t>(options_.prefill_chunk), to_checkpoint});
  // Scoring the prompt takes every position's logits: at most 16 MiB of them a chunk.
  const bool score = !is_extension && slot.job->request.prompt_logprobs();
  const size_t vocab = static_cast<size_t>(vocab_size_);
  if (score) n = std::min(n, std::max<size_t>(1, (size_t{4} << 20) / vocab));
  const bool last = slot.prefilled + n == prompt.size();
  const bool checkpoint = !last && n == to_checkpoint && caching();
  if (score) prompt_logits_.resize(n * vocab);
  const auto start = Clock::now();
  const aft_status status = aft_session_eval(
      slot.session.get(), prompt.data() + slot.prefilled, n,
      score ? AFT_LOGITS_ALL : (last || checkpoint ? AFT_LOGITS_LAST : AFT_LOGITS_NONE),
      score ? prompt_logits_.data() : slot.logits.data());
  if (status != AFT_OK && is_extension) return release(slot);  // only a cache entry missed
  if (status != AFT_OK) return fail(slot, failure("evaluating the prompt", status));
  metrics_.prefill_tokens += n;
  metrics_.prefill_us += static_cast<uint64_t>(ms_since(start) * 1000);
  if (score) {
    // Row r holds the distribution of the token after position prefilled + r.
    for (size_t r = 0; r < n; ++r) {
      const size_t next = slot.prefilled + r + 1;
      if (next == prompt.size()) break;
      add_logprob(slot, prompt_logits_.data() + r * vocab, prompt[next]);
    }
    std::copy_n(prompt_logits_.data() + (n - 1) * vocab, vocab, slot.logits.data());
  }
  slot.prefilled += n;
  if (checkpoint) {
    remember(slot, std::vector<int32_t>(prompt.begin(), prompt.begin() + slot.prefilled),
             slot.logits.data());
  }
  if (last && is_extension) {
    remember(slot, std::move(slot.extension), slot.logits.data());
    return release(slot);
  }
  if (last) prompt_done(slot);
}

void Scheduler::prompt_done(Slot& slot) {
  slot.result.prefill_ms = ms_since(slot.prefill_start);
  if (slot.result.cached_tokens < static_cast<int64_t>(slot.prefilled)) {
    remember(slot, slot.job->request.prompt, slot.logits.data());
  }
  slot.phase = Slot::Phase::kDecode;
  if (slot.job->request.max_tokens == 0) return finish(slot, "length");  // echo: the prompt only
  emit(slot, slot.logits.data());
}

// Samples the next token from logits and sends its text; ends the job or leaves the token to the
// next batch step.
void Scheduler::emit(Slot& slot, const float* logits) {
  const float* choices = logits;
  if (slot.json) {
    slot.allowed.assign(logits, logits + vocab_size_);
    if (json_tokens_.mask(*slot.json, slot.allowed.data()) == 0) {
      return fail(slot,
                  "response_format: no token of the model's vocabulary continues the JSON here");
    }
    choices = slot.allowed.data();
  }
  int32_t token = 0;
  aft_status status =
      aft_sampler_sample(slot.sampler.get(), choices, static_cast<size_t>(vocab_size_), &token);
  if (status != AFT_OK) return fail(slot, failure("sampling", status));
  const CompletionRequest& request = slot.job->request;
  if (token == end_of_text_) {  // not part of the completion, which ends here
    if (request.ranked()) slot.result.logprob_sum += scorer_.score(logits, token, 0).chosen.logprob;
    slot.result.end_of_text = true;
    return finish(slot, "stop");
  }
  if (slot.json) slot.json->push(vocabulary_.text(token));
  slot.result.tokens.push_back(token);
  if (request.top_logprobs >= 0 || request.ranked()) {
    slot.result.logprob_sum += add_logprob(slot, logits, token);
  }
  size_t length = 0;
  status = detokenize(slot, token, &length);
  if (status != AFT_OK) return fail(slot, failure("decoding a token", status));
  bool stopped = false;
  const std::string piece = slot.stop->push(std::string(slot.text.data(), length), &stopped);
  slot.answer += piece;
  slot.job->append(piece);
  if (stopped) return finish(slot, "stop", true);
  if (slot.json && slot.json->complete()) return finish(slot, "stop");
  if (slot.result.tokens.size() >= static_cast<size_t>(slot.job->request.max_tokens)) {
    return finish(slot, "length");
  }
  if (max_positions_ > 0 && aft_session_position(slot.session.get()) >= max_positions_) {
    return finish(slot, "length");
  }
}

double Scheduler::add_logprob(Slot& slot, const float* logits, int32_t token) {
  TokenLogprob scored = scorer_.score(logits, token, slot.job->request.top_logprobs);
  const double logprob = scored.chosen.logprob;
  if (slot.job->request.top_logprobs < 0) return logprob;  // only ranked (best_of)
  scored.text_offset = slot.characters;
  slot.characters += cli::code_points_starting(scored.chosen.text);
  slot.job->add_logprob(std::move(scored));
  return logprob;
}

aft_status Scheduler::detokenize(Slot& slot, int32_t token, size_t* length) {
  aft_status status = aft_detokenizer_push(slot.detokenizer.get(), token, slot.text.data(),
                                           slot.text.size(), length);
  if (status == AFT_ERR_BUFFER_TOO_SMALL) {  // a long token: nothing consumed, again with room
    slot.text.resize(*length);
    status = aft_detokenizer_push(slot.detokenizer.get(), token, slot.text.data(), slot.text.size(),
                                  length);
  }
  return status;
}

void Scheduler::decode_step() {
  std::vector<aft_session*> sessions;
  std::vector<int32_t> tokens;
  std::vector<Slot*> decoding;
  for (auto& slot : slots_) {
    if (slot->phase != Slot::Phase::kDecode) continue;
    sessions.push_back(slot->session.get());
    tokens.push_back(slot->result.tokens.back());
    decoding.push_back(slot.get());
  }
  if (decoding.empty()) return;
  const auto start = Clock::now();
  const aft_status status = aft_batch_decode(sessions.data(), tokens.data(), sessions.size(),
                                             AFT_LOGITS_LAST, batch_logits_.data());
  const double ms = ms_since(start);
  if (status != AFT_OK) {
    for (Slot* slot : decoding) fail(*slot, failure("decoding", status));
    return;
  }
  metrics_.decode_tokens += decoding.size();
  metrics_.decode_us += static_cast<uint64_t>(ms * 1000);
  for (size_t i = 0; i < decoding.size(); ++i) {
    decoding[i]->result.decode_ms += ms;
    emit(*decoding[i], batch_logits_.data() + i * static_cast<size_t>(vocab_size_));
  }
}

void Scheduler::finish(Slot& slot, const char* reason, bool at_stop_string) {
  // The end of the text: held bytes of an unfinished character, and text held for a stop string
  // that never came. After a stop string, both are dropped (the detokenizer is reset either way).
  size_t length = 0;
  aft_detokenizer_flush(slot.detokenizer.get(), slot.text.data(), slot.text.size(), &length);
  if (!at_stop_string) {
    bool stopped = false;
    std::string tail = slot.stop->push(std::string(slot.text.data(), length), &stopped);
    if (!stopped) tail += slot.stop->flush();
    slot.answer += tail;
    slot.job->append(tail);
  }
  slot.result.finish_reason = reason;
  const std::shared_ptr<Job> job = slot.job;
  std::vector<int32_t> tokens = job->request.prompt;
  tokens.insert(tokens.end(), slot.result.tokens.begin(), slot.result.tokens.end());
  job->finish(slot.result);
  slot.sequence = {};  // replaced below if the state after the last token can be had
  const bool keep = !options_.slot_save_path.empty();
  // Then, the client answered: the state after the completion's last token, for a follow-up
  // request that sends the conversation so far.
  if (slot.result.tokens.empty()) {  // max_tokens 0: the state after the prompt, already cached
    if (keep) keep_sequence(slot, tokens);
  } else if ((caching() || keep) &&
             (max_positions_ == 0 || aft_session_position(slot.session.get()) < max_positions_)) {
    const int32_t last = slot.result.tokens.back();
    if (aft_session_eval(slot.session.get(), &last, 1, AFT_LOGITS_LAST, slot.logits.data()) ==
        AFT_OK) {
      if (keep) keep_sequence(slot, tokens);
      remember(slot, std::move(tokens), slot.logits.data());
    }
  }
  if (!job->request.answered || !extend(slot, job->request.answered(slot.answer))) release(slot);
}

// A chat's next turn sends the answer back through the template, which writes it otherwise than
// the model generated it (after "Assistant: ", the generated text having its own leading space,
// say): the tokens part right after the prompt. So the conversation as the next turn will send it
// is evaluated now, from the longest cached prefix (the prompt's end), in chunks between steps as
// a prompt is, and cached: the next turn evaluates its new message only. Until then the slot stays
// busy and a request whose prompt starts with those tokens waits in the queue (extending()).
bool Scheduler::extend(Slot& slot, const std::string& conversation) {
  if (!caching()) return false;
  std::vector<int32_t> tokens;
  try {
    tokens = tokenize(model_, conversation, "messages");
  } catch (const std::exception&) {  // a cache entry missed, no more
    return false;
  }
  if (max_positions_ > 0 && static_cast<int64_t>(tokens.size()) >= max_positions_) return false;
  const PrefixCache::Entry* hit = cache_.longest_prefix(tokens, tokens.size(), false);
  if (hit == nullptr || hit->tokens.size() == tokens.size() ||
      aft_session_state_load(slot.session.get(), hit->state.data(), hit->state.size()) != AFT_OK) {
    return false;
  }
  slot.prefilled = hit->tokens.size();
  slot.extension = std::move(tokens);
  slot.job.reset();
  slot.phase = Slot::Phase::kExtend;
  return true;
}

// A prompt that begins with one being evaluated (a request's other choices, or clients sending
// one long system prompt at once) is evaluated once: the job waits in the queue until the other's
// prompt is cached, then starts from its state. Without a cache, each evaluates its own.
bool Scheduler::waits_for_prefill(
    const Job& job, const std::vector<std::pair<Slot*, std::shared_ptr<Job>>>& admitted) const {
  if (!cache_.enabled() || job.request.prompt_logprobs()) return false;
  const std::vector<int32_t>& prompt = job.request.prompt;
  auto begins = [&](const Job& other) {
    const std::vector<int32_t>& tokens = other.request.prompt;
    return tokens.size() <= prompt.size() &&
           std::equal(tokens.begin(), tokens.end(), prompt.begin());
  };
  for (const auto& slot : slots_) {
    if (slot->phase == Slot::Phase::kPrefill && slot->job && begins(*slot->job)) return true;
  }
  for (const auto& started : admitted) {  // this round's, not in their slots yet
    if (begins(*started.second)) return true;
  }
  return false;
}

bool Scheduler::extending(const std::vector<int32_t>& prompt) const {
  for (const auto& slot : slots_) {
    const std::vector<int32_t>& tokens = slot->extension;
    if (slot->phase == Slot::Phase::kExtend && tokens.size() <= prompt.size() &&
        std::equal(tokens.begin(), tokens.end(), prompt.begin())) {
      return true;
    }
  }
  return false;
}

void Scheduler::fail(Slot& slot, const std::string& message) {
  if (slot.job->cancelled()) {  // no handler is left to log it
    std::fprintf(stderr, "aft-server: %s cancelled (the client went away) after %zu tokens\n",
                 slot.job->name().c_str(), slot.result.tokens.size());
  }
  slot.result.error = message;
  // The session's state is no longer its last request's.
  slot.sequence = {};
  size_t length = 0;  // resets the detokenizer for the slot's next job
  aft_detokenizer_flush(slot.detokenizer.get(), slot.text.data(), slot.text.size(), &length);
  slot.job->finish(slot.result);
  release(slot);
}

void Scheduler::release(Slot& slot) {
  slot.json.reset();  // it points into the job's schema
  slot.job.reset();
  slot.extension.clear();
  slot.phase = Slot::Phase::kFree;
  --metrics_.active_slots;
  std::lock_guard<std::mutex> lock(mutex_);
  --busy_;
}

void Scheduler::remember(Slot& slot, std::vector<int32_t> tokens, const float* logits) {
  if (!caching()) return;
  // A cache that misses is only slower: a state that cannot be saved, or held, is not kept.
  try {
    PrefixCache::Entry entry;
    entry.tokens = std::move(tokens);
    entry.state = cli::save_session_state(slot.session.get());
    entry.logits.assign(logits, logits + vocab_size_);
    if (shared_ != nullptr) shared_->store(entry);  // a copy, written by another thread
    cache_.insert(std::move(entry));
  } catch (const std::bad_alloc&) {
  } catch (const cli::ApiError&) {
  }
}

void Scheduler::keep_sequence(Slot& slot, const std::vector<int32_t>& tokens) {
  try {  // as for the cache: a sequence that cannot be had is not kept
    slot.sequence.tokens = tokens;
    slot.sequence.logits = slot.logits;
    slot.sequence.state = cli::save_session_state(slot.session.get());
  } catch (const std::bad_alloc&) {
    slot.sequence = {};
  } catch (const cli::ApiError&) {
    slot.sequence = {};
  }
}

void Scheduler::on_thread(const std::function<void()>& task) {
  auto packaged = std::make_shared<std::packaged_task<void()>>(task);
  std::future<void> done = packaged->get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) throw RequestError(503, "the server is shutting down", "", "server_busy");
    controls_.push_back([packaged] { (*packaged)(); });
  }
  wake_.notify_all();
  done.get();
}

Scheduler::Slot& Scheduler::idle_slot(int id) {
  Slot& slot = *slots_.at(static_cast<size_t>(id));
  if (slot.phase != Slot::Phase::kFree) {
    throw RequestError(409, "slot " + std::to_string(id) + " is processing a request: retry later",
                       "id_slot");
  }
  return slot;
}

std::vector<Scheduler::SlotInfo> Scheduler::slot_infos() {
  std::vector<SlotInfo> infos;
  on_thread([&] {
    for (size_t i = 0; i < slots_.size(); ++i) {
      const Slot& slot = *slots_[i];
      SlotInfo info{static_cast<int>(i), slot.phase != Slot::Phase::kFree, 0};
      if (!info.processing) {
        info.n_tokens = slot.sequence.tokens.size();
      } else if (slot.job) {  // else admitted, not started yet
        info.n_tokens =
            static_cast<size_t>(std::max<int64_t>(0, aft_session_position(slot.session.get())));
      }
      infos.push_back(info);
    }
  });
  return infos;
}

cli::PrefixState Scheduler::slot_sequence(int id) {
  cli::PrefixState sequence;
  on_thread([&] {
    const Slot& slot = idle_slot(id);
    if (slot.sequence.tokens.empty()) {
      throw RequestError(400,
                         "slot " + std::to_string(id) +
                             " holds no sequence: it has not completed a request since it "
                             "started, was restored or erased",
                         "id_slot");
    }
    sequence = slot.sequence;
  });
  return sequence;
}

std::string Scheduler::restore_slot(int id, cli::PrefixState sequence) {
  std::string why;
  on_thread([&] {
    Slot& slot = idle_slot(id);
    // The idle slot's session is free to try the state on (and is reset after): the next request
    // loads its own state anyway.
    aft_session* session = slot.session.get();
    if (sequence.tokens.empty()) {
      why = "it holds no tokens";
    } else if (aft_session_state_load(session, sequence.state.data(), sequence.state.size()) !=
               AFT_OK) {
      why = std::string("its state does not load into this model's session: ") + aft_last_error();
    } else if (aft_session_position(session) != static_cast<int64_t>(sequence.tokens.size())) {
      why = "its state is at position " + std::to_string(aft_session_position(session)) +
            ", not after its " + std::to_string(sequence.tokens.size()) + " tokens";
    } else if (sequence.logits.size() != static_cast<size_t>(vocab_size_)) {
      // aft-run's --prompt-cache keeps none: its records cannot answer a prompt they end.
      why = "it holds " + std::to_string(sequence.logits.size()) +
            " logits of its last token, not this model's " + std::to_string(vocab_size_);
    } else {
      for (int32_t token : sequence.tokens) {
        if (token < 0 || token >= vocab_size_) {
          why = "its token " + std::to_string(token) + " is outside this model's vocabulary";
          break;
        }
      }
    }
    aft_session_reset(session);
    if (!why.empty()) return;
    slot.sequence = sequence;
    cache_.insert(std::move(sequence));
  });
  return why;
}

size_t Scheduler::erase_slot(int id) {
  size_t erased = 0;
  on_thread([&] {
    Slot& slot = idle_slot(id);
    erased = slot.sequence.tokens.size();
    slot.sequence = {};
  });
  return erased;
}

}  // namespace aft::server
