// One sequence being processed: its state and the buffers its graph runs in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <memory>
#include "aft.h"
#include "aligned_buffer.h"

#include "model.h"
#include "session_state.h"

namespace aft {

class Session {
 public:
  // Tokens per graph run: longer prompts are processed in chunks of this many, bounding memory.
  static constexpr std::size_t kMaxChunkRows = 256;
  // Models with at least this many matmul weights decode a token in one parallel region
  // (executor.h). Smaller ones keep most ops on one thread, and would only pay its barriers.
  static constexpr int64_t kOneRegionMinParameters = int64_t{1} << 22;

  Session(const Model& model, int n_threads);

  // Checks every token and the positions first: on a bad input (Error) the session is unchanged.
  void eval(const int32_t* tokens, std::size_t n_tokens, aft_logits_mode mode, float* logits);
  void reset();
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

  const Model& model_;
  int n_threads_;
  SessionState state_;
  std::vector<AlignedBuffer> buffers_;
  std::vector<float*> buffer_pointers_;
};

}  // namespace aft
