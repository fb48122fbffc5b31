// One sequence being processed: its state and the buffers its graph runs in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

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

 private:
  void check_input(const int32_t* tokens, std::size_t n_tokens) const;

  const Model& model_;
  int n_threads_;
  SessionState state_;
  std::vector<AlignedBuffer> buffers_;
  std::vector<float*> buffer_pointers_;
};

}  // namespace aft
