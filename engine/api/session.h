// One sequence being processed: its state and the buffers its graph runs in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "aft.h"
#include "engine/format/aligned_buffer.h"
#include "engine/runtime/scratch.h"
#include "models/aft/model.h"
#include "models/aft/session_state.h"
#include "models/aft/state_rollback.h"

namespace aft {

class Session {
 public:
  // Tokens per graph run: longer prompts are processed in chunks of this many, bounding memory.
  // Each chunk reads every weight once per thread (and, for q8_0 on AMX, dequantizes it): on a
  // Sapphire Rapids at 2 threads, enwik8 pp512 ran 7-13% faster in one chunk of 512 than in two
  // of 256 on the matrix units (bf16, q8_0), 2-4% in f32 (docs/benchmarks.md).
  static constexpr std::size_t kMaxChunkRows = 512;

  // n_threads: as aft_session_params.n_threads (0 = automatic, compute_threads.h).
  Session(const Model& model, int n_threads);

  // Checks every token and the positions first; on any failure after (out of memory, an error of
  // a kernel library) the state is restored (state_rollback.h): on an Error the session is
  // unchanged. Between chunks of kMaxChunkRows tokens it asks the abort callback, and stops with
  // Error AFT_ERR_ABORTED if told to, the chunks done consumed.
  void eval(const int32_t* tokens, std::size_t n_tokens, aft_logits_mode mode, float* logits);
  // One token for each of n sessions of one model in one pass (aft_batch_decode): each gets the
  // bits eval would give it. Everything is checked first: on an Error no session changed.
  static void decode_batch(Session* const* sessions, const int32_t* tokens, std::size_t n,
                           aft_logits_mode mode, float* logits);
  void reset();
  // Throws Error(AFT_ERR_INVALID_ARGUMENT) outside [0, AFT_MAX_THREADS].
  void set_threads(int n_threads);
  int threads() const { return n_threads_; }
  void set_abort_callback(aft_abort_callback callback, void* user_data);
  int64_t position() const { return state_.position; }
  const Model& model() const { return model_; }

  // The state as bytes (session_state_blob.h). save_state needs state_size() bytes of capacity
  // (Error AFT_ERR_BUFFER_TOO_SMALL otherwise); load_state leaves the session unchanged on a bad
  // blob (Error AFT_ERR_FORMAT).
  std::size_t state_size() const;
  void save_state(void* out, std::size_t capacity) const;
  void load_state(const void* data, std::size_t size);
  // A new session on the same model and threads, at the same point of the same sequence.
  std::unique_ptr<Session> fork() const;

 private:
  void check_input(const int32_t* tokens, std::size_t n_tokens) const;
  static void check_logits_mode(aft_logits_mode mode, const float* logits);
  bool abort_requested() const { return abort_callback_ && abort_callback_(abort_data_) != 0; }

  const Model& model_;
  int n_threads_;
  aft_abort_callback abort_callback_ = nullptr;
  void* abort_data_ = nullptr;
  SessionState state_;
  StateRollback rollback_;  // what a failing call restores
  Scratch scratch_;         // the ops' working memory, kept from call to call
  std::vector<AlignedBuffer> buffers_;
  std::vector<float*> buffer_pointers_;
};

}  // namespace aft
