#include "session.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <string>

#include "engine/format/error.h"
#include "engine/runtime/compute_threads.h"
#include "engine/runtime/executor.h"
#include "engine/runtime/parallel.h"
#include "engine/runtime/runtime_kernels.h"
#include "models/aft/session_state_blob.h"

namespace aft {
namespace {

// Inside a catch, once the state is restored: the exception in flight as an Error whose message
// says so (out of memory keeps its status).
[[noreturn]] void rethrow_unchanged(const std::string& unchanged) {
  const std::string note = " (" + unchanged + ")";
  try {
    throw;
  } catch (const std::bad_alloc&) {
    throw Error(AFT_ERR_OUT_OF_MEMORY, "out of memory" + note);
  } catch (const Error& e) {
    throw Error(e.status(), e.what() + note);
  } catch (const std::exception& e) {
    throw Error(AFT_ERR_INTERNAL, e.what() + note);
  } catch (...) {
    throw Error(AFT_ERR_INTERNAL, "unknown error" + note);
  }
}

}  // namespace

Session::Session(const Model& model, int n_threads)
    : model_(model), n_threads_(0), state_(model.initial_state()) {
  set_threads(n_threads);
  for (std::size_t width : model.buffer_plan().buffer_widths) {
    buffers_.emplace_back(width * kMaxChunkRows);
    buffer_pointers_.push_back(buffers_.back().data());
  }
}

void Session::reset() {
  state_.position = 0;
  for (MixerState& layer : state_.layers) layer.reset();
}

void Session::set_threads(int n_threads) {
  if (n_threads < 0 || n_threads > AFT_MAX_THREADS) {
    throw Error(AFT_ERR_INVALID_ARGUMENT,
                "n_threads must be in [0, " + std::to_string(AFT_MAX_THREADS) +
                    "] (0 = the physical cores, shared by the sessions computing at once), found " +
                    std::to_string(n_threads));
  }
  n_threads_ = n_threads;
}

void Session::set_abort_callback(aft_abort_callback callback, void* user_data) {
  abort_callback_ = callback;
  abort_data_ = user_data;
}

std::size_t Session::state_size() const { return state_blob_size(state_); }

void Session::save_state(void* out, std::size_t capacity) const {
  const std::size_t size = state_size();
  if (capacity < size) {
    throw Error(AFT_ERR_BUFFER_TOO_SMALL, "session state: " + std::to_string(size) +
                                              " bytes needed, the buffer has " +
                                              std::to_string(capacity));
  }
  write_state_blob(state_, model_.file().fingerprint(), out);
}

void Session::load_state(const void* data, std::size_t size) {
  const int64_t limit = model_.config().max_positions();
  read_state_blob(data, size, model_.file().fingerprint(),
                  limit > 0 ? limit : std::numeric_limits<int64_t>::max(), state_);
}

std::unique_ptr<Session> Session::fork() const {
  auto copy = std::make_unique<Session>(model_, n_threads_);
  copy->state_ = state_;
  return copy;
}

void Session::check_input(const int32_t* tokens, std::size_t n_tokens) const {
  if (n_tokens == 0) throw Error(AFT_ERR_INVALID_ARGUMENT, "no tokens to evaluate");
  if (!tokens) throw Error(AFT_ERR_INVALID_ARGUMENT, "tokens is NULL");
  const int64_t vocab = model_.config().vocab_size;
  for (std::size_t i = 0; i < n_tokens; ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      throw Error(AFT_ERR_OUT_OF_RANGE, "token " + std::to_string(tokens[i]) + " at index " +
                                            std::to_string(i) + " is outside the vocabulary [0, " +
                                            std::to_string(vocab) + ")");
    }
  }
  // A position past int64_t's range only comes from a loaded state (a model without a position
  // limit accepts any position up to it): refused before the sum would overflow.
  if (n_tokens > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() - state_.position)) {
    throw Error(AFT_ERR_OUT_OF_RANGE,
                "the session is at position " + std::to_string(state_.position) + ": " +
                    std::to_string(n_tokens) + " more tokens would pass the last position " +
                    std::to_string(std::numeric_limits<int64_t>::max()));
  }
  const int64_t limit = model_.config().max_positions();
  const int64_t end = state_.position + static_cast<int64_t>(n_tokens);
  if (limit > 0 && end > limit) {
    throw Error(AFT_ERR_OUT_OF_RANGE,
                "position " + std::to_string(std::max(state_.position, limit)) +
                    " is past the model's last position " + std::to_string(limit - 1) +
                    " (its position parameters cover max_seq_len = " + std::to_string(limit) +
                    " tokens; the session is at position " + std::to_string(state_.position) +
                    " and was given " + std::to_string(n_tokens) + " more)");
  }
}

void Session::check_logits_mode(aft_logits_mode mode, const float* logits) {
  if (mode != AFT_LOGITS_NONE && mode != AFT_LOGITS_LAST && mode != AFT_LOGITS_ALL) {
    throw Error(AFT_ERR_INVALID_ARGUMENT,
                "unknown logits mode " + std::to_string(static_cast<int64_t>(mode)));
  }
  if (mode != AFT_LOGITS_NONE && !logits) {
    throw Error(AFT_ERR_INVALID_ARGUMENT, "logits is NULL but logits were asked for");
  }
}

void Session::eval(const int32_t* tokens, std::size_t n_tokens, aft_logits_mode mode,
                   float* logits) {
  check_logits_mode(mode, logits);
  check_input(tokens, n_tokens);

  const ComputeThreads threads(n_threads_);
  const std::size_t vocab = static_cast<std::size_t>(model_.config().vocab_size);
  const Sequence sequence{&state_, &rollback_};
  try {
    scratch_.begin_call(threads.count());
    rollback_.begin(state_, n_tokens);
  } catch (...) {
    rethrow_unchanged("the session is unchanged");
  }
  for (std::size_t done = 0; done < n_tokens;) {
    if (done > 0 && abort_requested()) {
      rollback_.commit();
      throw Error(AFT_ERR_ABORTED, "stopped by the abort callback after " + std::to_string(done) +
                                       " of " + std::to_string(n_tokens) +
                                       " tokens; the session is at position " +
                                       std::to_string(state_.position));
    }
    try {
      const std::size_t rows = std::min(kMaxChunkRows, n_tokens - done);
      const bool last_chunk = done + rows == n_tokens;
      std::size_t output_rows = 0;
      if (mode == AFT_LOGITS_ALL) output_rows = rows;
      if (mode == AFT_LOGITS_LAST && last_chunk) output_rows = 1;

      // A decoded token runs in one parallel region (executor.h): its ops split their work over
      // the same threads with a barrier between them, not a fork and join each.
      const bool one_region = rows == 1;
      const ExecContext ctx{runtime_kernels(), threads.count(), tokens + done, &sequence, 1,
                            scratch_,          one_region};
      const Tensor out =
          execute(model_.graph(), model_.buffer_plan(), buffer_pointers_, ctx, rows, output_rows);
      if (output_rows > 0) {
        float* dst = mode == AFT_LOGITS_ALL ? logits + done * vocab : logits;
        std::memcpy(dst, out.data, output_rows * vocab * sizeof(float));
      }
      state_.position += static_cast<int64_t>(rows);
      done += rows;
    } catch (...) {
      rollback_.restore();
      rethrow_unchanged("the session is unchanged");
    }
  }
  rollback_.commit();
}

void Session::decode_batch(Session* const* sessions, const int32_t* tokens, std::size_t n,
                           aft_logits_mode mode, float* logits) {
  if (!sessions) throw Error(AFT_ERR_INVALID_ARGUMENT, "sessions is NULL");
  if (n == 0) throw Error(AFT_ERR_INVALID_ARGUMENT, "no sessions to decode");
  if (!tokens) throw Error(AFT_ERR_INVALID_ARGUMENT, "tokens is NULL");
  check_logits_mode(mode, logits);
  std::vector<SessionState*> states(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::string name = "sessions[" + std::to_string(i) + "]";
    if (!sessions[i]) throw Error(AFT_ERR_INVALID_ARGUMENT, name + " is NULL");
    if (&sessions[i]->model_ != &sessions[0]->model_) {
      throw Error(AFT_ERR_INVALID_ARGUMENT, name + " is of another model than sessions[0]");
    }
    try {
      sessions[i]->check_input(tokens + i, 1);
    } catch (const Error& e) {
      throw Error(e.status(), name + ": " + e.what());
    }
    states[i] = &sessions[i]->state_;
  }
  std::vector<SessionState*> sorted = states;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    throw Error(AFT_ERR_INVALID_ARGUMENT, "a session appears twice among the sessions");
  }

  Session& lead = *sessions[0];
  const ComputeThreads threads(lead.n_threads_);
  const std::size_t vocab = static_cast<std::size_t>(lead.model_.config().vocab_size);
  std::vector<Sequence> sequences(n);
  std::vector<char> begun(n, 0);  // char, not bool: the threads set their own sessions' flags
  try {
    lead.scratch_.begin_call(threads.count());
    // The sessions' rollbacks save their states, each its own: split among the threads (copies
    // of about 16 words a channel and layer, which left the other threads waiting).
    const auto& config = lead.model_.config();
    parallel_ranges(n, 1, threads.count(),
                    static_cast<std::size_t>(16 * config.n_layers * config.d_model),
                    [&](std::size_t first, std::size_t end) {
                      for (std::size_t i = first; i < end; ++i) {
                        sessions[i]->rollback_.begin(*states[i], 1);
                        begun[i] = 1;
                      }
                    });
    for (std::size_t i = 0; i < n; ++i) {
      sequences[i] = Sequence{states[i], &sessions[i]->rollback_};
    }
    for (std::size_t done = 0; done < n;) {
      const std::size_t rows = std::min(kMaxChunkRows, n - done);
      // A sequence per row (a chunk of one row is also a sequence's next token alone), in one
      // parallel region, as a decoded token is.
      const ExecContext ctx{runtime_kernels(),
                            threads.count(),
                            tokens + done,
                            sequences.data() + done,
                            rows,
                            lead.scratch_,
                            true};
      const std::size_t output_rows = mode == AFT_LOGITS_NONE ? 0 : rows;
      const Tensor out = execute(lead.model_.graph(), lead.model_.buffer_plan(),
                                 lead.buffer_pointers_, ctx, rows, output_rows);
      if (output_rows > 0) {
        std::memcpy(logits + done * vocab, out.data, rows * vocab * sizeof(float));
      }
      for (std::size_t i = done; i < done + rows; ++i) states[i]->position += 1;
      done += rows;
    }
  } catch (...) {
    for (std::size_t i = 0; i < n; ++i) {
      if (begun[i]) sessions[i]->rollback_.restore();
    }
    rethrow_unchanged("no session changed");
  }
  for (std::size_t i = 0; i < n; ++i) sessions[i]->rollback_.commit();
}

}  // namespace aft
